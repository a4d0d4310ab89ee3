"""A stand-in for NeMo RL's vLLM generation server (``vllm_worker_async.py``): its two routes, its prefix contract.

NeMo RL's workers serve exactly these (plus FastAPI's own docs pages); ``/v1/completions`` is a 404::

    POST /v1/chat/completions {"messages", "required_prefix_token_ids"?, "temperature", "top_p", "top_k"?,
                               "max_tokens"|"max_completion_tokens"?, "logprobs"?, "top_logprobs"?, "model"?,
                               "add_generation_prompt"? (true), "chat_template_kwargs"?, "seed"?, ...}
        -> {"id", "object": "chat.completion", "created", "model", "choices": [{"index": 0, "finish_reason",
            "stop_reason", "message": {"role": "assistant", "content", "tool_calls": [], "prompt_token_ids",
            "generation_token_ids", "generation_log_probs"}, "logprobs": {"content": [{"token": "token_id:N",
            "logprob", "bytes": null, "top_logprobs": []}]}}], "usage": {"prompt_tokens", "completion_tokens",
            "total_tokens"}}
        -> 500 when top_k is set (not -1), top_p is unset, or temperature/top_p match neither the training nor the
           validation sampling (NeMo RL's on-policy asserts; FastAPI answers an AssertionError with 500)
        -> 400 for logprobs without top_logprobs (token ids are always returned as ``token_id:N``), a prompt that
           fills the context ("Prompt length (N) fills or exceeds max_model_len (M)"); 404 for another model name
    POST /tokenize {"messages", "required_prefix_token_ids"?, "add_generation_prompt"?} | {"prompt": str}
        -> {"count", "max_model_len", "tokens", "token_strs": null}

The prompt is NeMo RL's: ``messages`` rendered with the chat template (``apply_chat_template``, as vLLM's renderer
does); with a required prefix (given, or the last message's ``prompt_token_ids + generation_token_ids``, as NeMo Gym
sends them), the prefix is kept and the template's ids are spliced after it at the N-th EOS, N being the EOS count of
the messages up to the last assistant one rendered without a generation prompt (:func:`splice_prefix`, written from
``replace_prefix_tokens``'s contract). ``max_tokens`` is clamped to what the context leaves. The model is the same
fake as the SGLang stand-in's (``_generate``: ids, log-probs, aborts, faults), so the two can be compared id for id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from slime_tau_plugin.tools.faults.spec import FaultInjector
from slime_tau_plugin.tools.servers.completions_wire import openai_error, tokenize_reply
from slime_tau_plugin.tools.servers.fault_injection import after_render
from slime_tau_plugin.tools.servers.http_base import Reply, RequestLog
from slime_tau_plugin.tools.servers.sglang_server import FakeModel, SGLangServer, _Generated

INTERNAL_ERROR: Reply = (500, "Internal Server Error")
"""What NeMo RL's FastAPI app answers for a failed ``assert`` in its route (Starlette's plain 500)."""
LOGPROB_FLOOR = -9999.0
"""NeMo RL's ``VLLM_LOGPROB_FLOOR``: generation log-probs are floored here before they are returned."""


class SpliceError(ValueError):
    """The template's ids hold fewer EOS tokens than the prefix's messages (NeMo RL's assertion)."""


def splice_prefix(
    prefix: Sequence[int], template_prefix: Sequence[int], template: Sequence[int], eos: int
) -> list[int]:
    """NeMo RL's prompt for a required prefix: ``prefix`` (without its trailing EOS) + ``template`` from its N-th
    EOS on, N = the EOS count of ``template_prefix`` (the messages up to the last assistant one).

    Raises:
        SpliceError: ``template`` has fewer than N EOS tokens (or N is 0).
    """
    if not prefix:
        return list(template)
    cut = len(prefix) - 1 if prefix[-1] == eos else len(prefix)
    needed = list(template_prefix).count(eos)
    seen = 0
    for pos, token in enumerate(template):
        if token == eos:
            seen += 1
            if seen == needed:
                return list(prefix[:cut]) + list(template[pos:])
    raise SpliceError(f"EOS token #{needed} not found in template_token_ids (only found {seen} EOS tokens total)!")


class NeMoRLServer(SGLangServer):
    """NeMo RL's generation server surface around a :class:`FakeModel` with a tokenizer (the oracle's)."""

    name = "nemo-rl-server"
    fault_routes = frozenset({"/v1/chat/completions"})

    def __init__(
        self,
        policy: FakeModel,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        val_temperature: float | None = None,
        val_top_p: float | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        context_len: int = 32768,
        latency_s: float = 0.0,
        faults: FaultInjector | None = None,
    ) -> None:
        """``temperature``/``top_p``: NeMo RL's ``policy.generation`` settings (``val_*`` default to them)."""
        if getattr(policy, "tokenizer", None) is None:
            raise ValueError("NeMoRLServer renders chat messages: its model needs a tokenizer")
        super().__init__(policy, host=host, port=port, context_len=context_len, latency_s=latency_s, faults=faults)
        self.tokenizer = policy.tokenizer  # type: ignore[attr-defined]
        self.sampling = {(temperature, top_p), (val_temperature or temperature, val_top_p or top_p)}
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.chat_requests = RequestLog()
        """The latest /v1/chat/completions bodies, in order."""
        self.tokenize_requests = RequestLog()

    def get_routes(self) -> dict[str, Callable[[], Reply]]:
        return {}

    def post_routes(self) -> dict[str, Callable[[Any, dict[str, str]], Reply]]:
        return {"/v1/chat/completions": self.chat_completions, "/tokenize": self.tokenize}

    # --- the prompt ------------------------------------------------------------------------------

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool, kwargs: dict[str, Any]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages,
            tokenize=True,
            return_dict=False,
            add_generation_prompt=add_generation_prompt,
            **{**self.chat_template_kwargs, **kwargs},
        )
        return list(ids)

    def prompt_ids(self, body: dict[str, Any]) -> list[int] | Reply:
        """The ids NeMo RL samples from for ``body`` (see the module docstring), or an error reply."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return openai_error(400, "messages must be a non-empty list of message objects", "messages")
        prefix = body.get("required_prefix_token_ids")
        if prefix is None:
            for message in reversed(messages):
                if "prompt_token_ids" in message:
                    prefix = list(message["prompt_token_ids"]) + list(message.get("generation_token_ids") or [])
                    break
        kwargs = body.get("chat_template_kwargs") or {}
        plain = [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "name")} for m in messages]
        template = self.render(plain, bool(body.get("add_generation_prompt", True)), kwargs)
        if not prefix:
            return template
        if not isinstance(prefix, list) or not all(isinstance(t, int) for t in prefix):
            return openai_error(400, "required_prefix_token_ids must be a list of ints", "required_prefix_token_ids")
        last = max((i for i, m in enumerate(plain) if m.get("role") == "assistant"), default=len(plain) - 1)
        try:
            return splice_prefix(prefix, self.render(plain[: last + 1], False, kwargs), template, self.eos)
        except SpliceError:
            return INTERNAL_ERROR

    @property
    def eos(self) -> int:
        return int(self.tokenizer.eos_token_id)

    # --- routes ----------------------------------------------------------------------------------

    def tokenize(self, body: Any, headers: dict[str, str]) -> Reply:
        self.tokenize_requests.append(body)
        if isinstance(body, dict) and "prompt" in body:
            return tokenize_reply(self.tokenizer, body, self.context_len)
        if not isinstance(body, dict):
            return openai_error(400, "the body must be a JSON object")
        ids = self.prompt_ids(body)
        if isinstance(ids, tuple):
            return ids
        return 200, {"count": len(ids), "max_model_len": self.context_len, "tokens": ids, "token_strs": None}

    async def chat_completions(self, body: Any, headers: dict[str, str] | None = None) -> Reply:
        self.chat_requests.append(body)
        number = self.chat_requests.total
        if not isinstance(body, dict):
            return openai_error(400, "the body must be a JSON object")
        refused = self._refusal(body)
        if refused is not None:
            return refused
        prompt = self.prompt_ids(body)
        if isinstance(prompt, tuple):
            return prompt
        remaining = self.context_len - len(prompt)
        if remaining <= 0:
            return openai_error(
                400,
                f"Prompt length ({len(prompt)}) fills or exceeds max_model_len ({self.context_len}). "
                "No room for output tokens.",
            )
        requested = body.get("max_completion_tokens") or body.get("max_tokens")
        max_tokens = remaining if requested is None else min(int(requested), remaining)
        params = {"max_new_tokens": max_tokens, "temperature": body["temperature"], "top_p": body["top_p"]}
        generated = await self._generate(f"chatcmpl-{number}", prompt, params, max_tokens)
        if not isinstance(generated, _Generated):
            return generated
        return 200, after_render(generated.fault, self._chat_body(body, prompt, generated))

    def _refusal(self, body: dict[str, Any]) -> Reply | None:
        """NeMo RL's checks before generating, with the status its server answers them with."""
        off_policy = body.get("top_k") not in (None, -1) or body.get("top_p") is None
        if off_policy or (body.get("temperature", 1.0), body["top_p"]) not in self.sampling:
            return INTERNAL_ERROR  # NeMo RL's assert: FastAPI says no more than this
        body.setdefault("temperature", 1.0)
        if body.get("model") not in (None, "", self.model_id):
            return openai_error(404, f"The model `{body['model']}` does not exist.", "model")
        if body.get("stream"):
            return openai_error(400, "stream=true is not supported by this server", "stream")
        if body.get("logprobs") and body.get("top_logprobs") is None:
            msg = "`top_logprobs` must be set when requesting token information from the NeMo-RL chat endpoint."
            return openai_error(400, msg, "top_logprobs")
        return None

    def _chat_body(self, body: dict[str, Any], prompt: list[int], generated: _Generated) -> dict[str, Any]:
        ids = generated.ids
        lps = [max(lp, LOGPROB_FLOOR) for lp in generated.log_probs]
        finish = generated.finish["type"]
        text = self.decode(ids, skip_special_tokens=bool(body.get("skip_special_tokens", True)))
        message = {"role": "assistant", "content": text, "tool_calls": []}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "stop_reason": None}
        if body.get("logprobs"):
            entries = [
                {"token": f"token_id:{t}", "logprob": lp, "bytes": None, "top_logprobs": []}
                for t, lp in zip(ids, lps, strict=True)
            ]
            choice["logprobs"] = {"content": entries}
            message.update(prompt_token_ids=prompt, generation_token_ids=ids, generation_log_probs=lps)
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)}
        return {
            "id": generated.rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model_id,
            "choices": [choice],
            "usage": usage,
        }
