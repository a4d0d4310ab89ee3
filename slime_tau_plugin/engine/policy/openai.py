"""Async client for an OpenAI-compatible ``/v1/completions`` fed token ids (vLLM; SGLang's OpenAI API).

Wire format (vLLM's ``CompletionRequest``/``CompletionResponse``; request, then response)::

    POST /v1/completions {"model": "..." (omitted when unset: the server's only model),
                          "prompt": [151644, 8948, ...], "max_tokens": N, "temperature": 1.0, "top_p": 1.0,
                          "logprobs": 0, "return_token_ids": true, "return_tokens_as_token_ids": true,
                          "include_stop_str_in_output": true, "skip_special_tokens": false, "stream": false}
    200 {"id": "cmpl-...", "model": "...",
         "choices": [{"index": 0, "text": "...", "finish_reason": "stop"|"length"|"abort",
                      "stop_reason": 151645|"</s>"|null,          # vLLM (SGLang: "matched_stop")
                      "token_ids": [...],                          # only with return_token_ids
                      "logprobs": {"tokens": ["token_id:151645", ...], "token_logprobs": [-0.01, ...],
                                   "top_logprobs": [...], "text_offset": [...]}}],
         "usage": {"prompt_tokens", "completion_tokens", "prompt_tokens_details": {"cached_tokens"}|null},
         "metadata": {"weight_version": "..."}}                    # SGLang only
    400 {"error": {"message": "... maximum context length is 32768 tokens ...", "type", "code": 400}}

Output ids come from ``choices[0].token_ids`` (vLLM since PR #22587, Aug 2025; SGLang 0.5.23), else from
``logprobs.tokens`` written as ``token_id:N`` (vLLM's ``return_tokens_as_token_ids``); the text is never
re-tokenized. Once a server is seen writing ``token_id:N`` (vLLM), ``return_token_ids`` is no longer sent:
it also echoes the whole prompt as ``prompt_token_ids``.

The stop token: vLLM keeps it (EOS, or a ``stop_token_ids`` match reported as ``stop_reason``) in
``token_ids`` and in the log-probs, and drops it only from ``text`` (unless ``include_stop_str_in_output``);
SGLang keeps it in ``output_ids`` too. So the end-of-turn id is sampled data with its log-prob (mask 1). A
server that dropped it would leave the turn open; the engine then closes it with the template's ids at
mask 0, as for any turn that ends without them. SGLang's sampling-parameter names are translated here, so
the engine sends one dict to every client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.errors import PolicyProtocolError
from slime_tau_plugin.engine.policy.client import (
    FinishReason,
    GenerateResult,
    HTTPPolicyClient,
    http_settings,
)
from slime_tau_plugin.engine.shared import shared_state

if TYPE_CHECKING:
    from slime_tau_plugin.engine.config.tau_config import TauConfig

logger = logging.getLogger(__name__)

TOKEN_ID_PREFIX = "token_id:"
"""How vLLM writes a token in ``logprobs.tokens`` with ``return_tokens_as_token_ids``."""

FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "abort": FinishReason.ABORT,
    "repetition": FinishReason.LENGTH,  # vLLM's repetition detection cut the turn (only when requested)
}

_RENAMED = {"max_new_tokens": "max_tokens", "min_new_tokens": "min_tokens", "sampling_seed": "seed"}
_SAME_NAME = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "stop",
        "stop_token_ids",
        "ignore_eos",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "logit_bias",
    }
)
_TEXT_ONLY = frozenset({"no_stop_trim"})
"""SGLang switches that only shape ``text``; the ids are what we keep (``include_stop_str_in_output`` is sent)."""


class OpenAICompletionsPolicy(HTTPPolicyClient):
    """A connection-reusing client for one OpenAI-compatible completions server (see ``net/loop_http.py``)."""

    def __init__(self, base_url: str, *, model: str | None = None, **http: Any) -> None:
        """``base_url`` with or without ``/v1`` (``http://host:8000`` and ``.../v1`` are the same server);
        ``http``: :class:`HTTPPolicyClient`'s timeouts, retries and connection limit."""
        super().__init__(base_url.rstrip("/").removesuffix("/v1"), **http)
        self.model = model
        self.tokens_are_ids = False
        """Learned from the first answer: the server writes ``token_id:N`` tokens, so ``return_token_ids``,
        which also echoes the whole prompt (1.8 ms of JSON per turn at 30k ids), is no longer asked for."""

    @classmethod
    def from_config(cls, config: TauConfig) -> OpenAICompletionsPolicy:
        """The client ``config`` describes (URL, model name, timeout, retries, in-flight bound, outage tolerance)."""
        return cls(config.policy_url or "", model=config.policy_model, **http_settings(config))

    path = "/v1/completions"

    def request(self, input_ids: Sequence[int], sampling_params: dict[str, Any], rid: str | None) -> dict[str, Any]:
        """``input_ids`` as the prompt (:func:`completions_request`); ``return_token_ids`` until the server is seen
        writing ``token_id:N``."""
        return completions_request(input_ids, sampling_params, self.model, return_token_ids=not self.tokens_are_ids)

    def not_found(self) -> str:
        hint = f"tau_policy_model={self.model!r}" if self.model else "tau_policy_url"
        return f"check {hint}: the server must serve /v1/completions and list the model at GET /v1/models"

    def result(self, body: Any, rid: str | None) -> GenerateResult:
        """:func:`parse_completions_response`; the first answer with ids tells whether its tokens are ids."""
        result = parse_completions_response(body, rid)
        if not self.tokens_are_ids and result.output_ids:
            tokens = (body["choices"][0].get("logprobs") or {}).get("tokens") or []
            self.tokens_are_ids = _token_ids(tokens) == result.output_ids
        return result


def completions_request(
    input_ids: Sequence[int], sampling_params: dict[str, Any], model: str | None, *, return_token_ids: bool = True
) -> dict[str, Any]:
    """The completions body for one turn: SGLang-named ``sampling_params`` in vLLM's vocabulary."""
    payload: dict[str, Any] = {} if model is None else {"model": model}
    payload["prompt"] = list(input_ids)
    payload["skip_special_tokens"] = False
    payload.update(openai_sampling(sampling_params))
    payload.update(
        logprobs=0,  # the sampled token's own log-prob, no alternatives
        return_token_ids=return_token_ids,
        return_tokens_as_token_ids=True,
        include_stop_str_in_output=True,
        stream=False,
    )
    return payload


def openai_sampling(sampling_params: dict[str, Any]) -> dict[str, Any]:
    """SGLang-named ``sampling_params`` in vLLM's OpenAI vocabulary (``max_tokens``, ``seed``, ...).

    Parameters with no OpenAI equivalent are left out (logged once each): SGLang ignores unknown fields, vLLM
    only warns, and neither may change what is sampled behind our back.
    """
    payload: dict[str, Any] = {}
    for key, value in sampling_params.items():
        if key in _RENAMED:
            payload[_RENAMED[key]] = value
        elif key in _SAME_NAME:
            payload[key] = value
        elif key not in _TEXT_ONLY and shared_state().first_time("completions: unsent sampling parameter", key):
            logger.warning("sampling parameter %s=%r has no /v1/completions equivalent; not sent", key, value)
    return payload


def parse_completions_response(body: Any, rid: str | None = None) -> GenerateResult:
    """Turn a completions JSON answer into a :class:`GenerateResult` (the only reader of its shape).

    ``meta_info`` is written in SGLang's shape (``finish_reason: {type, matched}``, ``prompt_tokens``,
    ``completion_tokens``, ``cached_tokens`` and ``weight_version`` when the server reports them), so
    slime's ``Sample`` bookkeeping reads it as it reads ``/generate``'s.

    Raises:
        PolicyProtocolError: no single choice, an unknown finish reason, no ids (neither ``token_ids`` nor
            ``token_id:N`` tokens), a missing log-prob, or ids and log-probs that disagree.
    """
    choice, finish = single_choice(body, "/v1/completions body", rid)
    logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else {}
    tokens, token_logprobs = list(logprobs.get("tokens") or []), list(logprobs.get("token_logprobs") or [])
    if not all(isinstance(x, (int, float)) for x in token_logprobs):
        raise PolicyProtocolError(f"a token has no log-prob in logprobs.token_logprobs (rid={rid})")
    log_probs = tuple(float(x) for x in token_logprobs)
    ids_from_tokens = _token_ids(tokens)
    ids = choice.get("token_ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(t, int) for t in ids)):
        raise PolicyProtocolError(f"token_ids is not a list of ints (rid={rid}): {str(ids)[:100]!r}")
    if ids is None:
        ids = ids_from_tokens
    elif ids_from_tokens is not None and tuple(ids) != ids_from_tokens:
        raise PolicyProtocolError(f"token_ids and logprobs.tokens disagree (rid={rid})")
    if ids is None:
        if finish is FinishReason.ABORT and not tokens:
            ids = ()
        else:
            raise PolicyProtocolError(
                f"/v1/completions answer has no token ids (rid={rid}): the server ignored return_token_ids and "
                "return_tokens_as_token_ids (vLLM: upgrade, or start it with --return-tokens-as-token-ids)"
            )
    output_ids = tuple(ids)
    if len(log_probs) != len(output_ids):
        raise PolicyProtocolError(
            f"{len(output_ids)} output ids but {len(log_probs)} log-probs; send logprobs=0 (rid={rid})"
        )
    return GenerateResult(output_ids, log_probs, finish, _meta_info(body, choice, finish))


def single_choice(body: Any, what: str, rid: str | None) -> tuple[dict[str, Any], FinishReason]:
    """The one choice of an OpenAI-shaped answer (``what`` names it in errors) and why it finished; completions
    and NeMo RL's chat completions read their choice through it.

    Raises:
        PolicyProtocolError: no single choice, or a finish reason not in :data:`FINISH_REASONS`.
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise PolicyProtocolError(f"{what} has no single choice (rid={rid}): {str(body)[:200]!r}")
    choice = choices[0]
    finish = FINISH_REASONS.get(choice.get("finish_reason"))
    if finish is None:
        raise PolicyProtocolError(f"unknown finish_reason {choice.get('finish_reason')!r} (rid={rid})")
    return choice, finish


def _token_ids(tokens: list[Any]) -> tuple[int, ...] | None:
    """Ids from ``token_id:N`` tokens; None when the tokens are text (the server did not write ids)."""
    if not tokens or not all(isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) for t in tokens):
        return None
    try:
        return tuple(int(t[len(TOKEN_ID_PREFIX) :]) for t in tokens)
    except ValueError:
        return None


def _meta_info(body: dict[str, Any], choice: dict[str, Any], finish: FinishReason) -> dict[str, Any]:
    matched = choice.get("stop_reason", choice.get("matched_stop"))
    meta: dict[str, Any] = {"id": body.get("id"), "finish_reason": {"type": finish.value, "matched": matched}}
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    for key in ("prompt_tokens", "completion_tokens"):
        if isinstance(usage.get(key), int):
            meta[key] = usage[key]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        meta["cached_tokens"] = details["cached_tokens"]
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and metadata.get("weight_version") is not None:
        meta["weight_version"] = metadata["weight_version"]
    return meta
