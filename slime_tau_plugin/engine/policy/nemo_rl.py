"""Async client for NeMo RL's vLLM servers: our held ids in, as the prefix its contract enforces; exact ids out.

NeMo RL's generation workers serve two routes (``vllm_worker_async.py``; no ``/v1/completions``)::

    POST /tokenize            {"messages": [...], "required_prefix_token_ids"?: [...]} -> {"tokens", "count", ...}
    POST /v1/chat/completions {"messages": [...], "required_prefix_token_ids"?: [...], "temperature", "top_p",
                               "max_tokens", "logprobs": true, "top_logprobs": 0, ...}
    200 {"choices": [{"finish_reason", "message": {"content", "prompt_token_ids", "generation_token_ids",
                                                     "generation_log_probs"}}], "usage": {...}}

The server renders ``messages`` with the chat template, then keeps ``required_prefix_token_ids`` exactly and splices
the template's ids after it at an end-of-sequence token (``replace_prefix_tokens``): the prompt it samples from is
``prefix`` (its trailing EOS dropped) + the template's ids from the EOS that closes the last message. So the prefix
we send is our held ids up to their last EOS, and ``messages`` is one empty user message, whose template ids from
that EOS on are the generation prompt (``<|im_end|>\\n<|im_start|>assistant\\n`` for Qwen). The prompt is then our
held ids exactly when the ids after our last EOS are that same generation prompt.

Exactness is checked, not assumed: the first request to each server goes through ``/tokenize`` with the same body
(the server's own prefix code) and must come back as our held ids; every answer's ``prompt_token_ids`` (what the
engine really sampled from) must equal them too. Anything else is a :class:`PolicyProtocolError` naming the first
differing position (the episode fails and is not trained), never a silently re-tokenized sample. ``temperature``
and ``top_p`` are always sent: NeMo RL refuses a request whose sampling differs from its training (or validation)
settings. Several servers (NeMo RL's data-parallel ``base_urls``, comma-separated in ``tau_policy_url``) share the
load: an episode stays on the server of its last turn (its prefix cache) while that one answers, else the one with
the fewest requests in flight (``net/replicas.py``).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.errors import PolicyProtocolError
from slime_tau_plugin.engine.net.endpoints import EndpointGuard, EndpointRole, GuardSettings
from slime_tau_plugin.engine.net.loop_http import LoopBoundHTTP
from slime_tau_plugin.engine.net.replicas import ReplicaSet, split_urls
from slime_tau_plugin.engine.net.retry import RetrySettings
from slime_tau_plugin.engine.policy.client import FinishReason, GenerateResult, not_found_hint, post_json_on_replicas
from slime_tau_plugin.engine.policy.openai import openai_sampling, single_choice

if TYPE_CHECKING:
    from slime_tau_plugin.engine.config.tau_config import TauConfig

PROBE_MESSAGES = ({"role": "user", "content": ""},)
"""What ``messages`` holds: the template ids it adds after the prefix are only its closing EOS + generation prompt."""
AFFINITY_LIMIT = 65536
"""Episodes whose server is remembered (oldest forgotten first)."""


@dataclass(slots=True)
class _Sticky(ReplicaSet):
    """One request's view of the replicas: the episode's last server first, while it answers."""

    preferred: EndpointGuard | None = field(default=None)

    def pick(self, avoid: EndpointGuard | None = None) -> EndpointGuard:
        g = self.preferred
        if g is not None and avoid is None and not g.is_open and not g.is_failing:
            g.last_sent = time.monotonic()  # as ReplicaSet.pick records its choice (its probes read it)
            return g
        return ReplicaSet.pick(self, avoid)


class NeMoRLPolicy:
    """A client for one or several NeMo RL vLLM servers (one model, data-parallel)."""

    def __init__(
        self,
        base_urls: str | Sequence[str],
        eos_token_id: int,
        *,
        model: str | None = None,
        timeout_s: float = 600.0,
        retry: RetrySettings | None = None,
        guard_settings: GuardSettings | None = None,
        max_connections: int = 4096,
    ) -> None:
        """``base_urls`` with or without ``/v1`` (NeMo RL advertises ``http://ip:port/v1``); ``eos_token_id``: the
        tokenizer's EOS, where NeMo RL splices (``tokenizer.eos_token_id``)."""
        urls = tuple(u.removesuffix("/v1") for u in split_urls(base_urls))
        if not urls:
            raise ValueError("NeMoRLPolicy needs at least one server URL")
        self.urls = urls
        self.eos = int(eos_token_id)
        self.model = model
        self.retry = retry or RetrySettings()
        self.replicas = ReplicaSet.for_urls(EndpointRole.POLICY, urls, guard_settings or GuardSettings())
        self._http = {u: LoopBoundHTTP(u, timeout_s=timeout_s, max_connections=max_connections) for u in urls}
        self._proven: dict[str, set[tuple[int, ...]]] = {u: set() for u in urls}
        """Per server, the generation prompts (ids after the last EOS) its ``/tokenize`` has shown it reproduces."""
        self._affinity: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._proving: dict[tuple[int, str, tuple[int, ...]], asyncio.Future[None]] = {}

    @classmethod
    def from_config(cls, config: TauConfig) -> NeMoRLPolicy:
        """The client ``config`` describes: ``tau_policy_url`` (one URL or several, comma-separated), the model,
        the tokenizer's EOS, timeouts, retries, in-flight bound and outage tolerance."""
        from slime_tau_plugin.engine.chat.template_text import load_tokenizer

        tokenizer = load_tokenizer(str(config.tokenizer_path))
        return cls(
            config.policy_url or "",
            tokenizer.eos_token_id,
            model=config.policy_model,
            timeout_s=config.policy_timeout_s,
            retry=RetrySettings(attempts=config.policy_retries),
            guard_settings=GuardSettings(config.policy_max_inflight, config.outage_tolerance_s),
        )

    async def aclose(self) -> None:
        for http in self._http.values():
            await http.aclose()

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult:
        """One generation from ``input_ids`` exactly, on the episode's server.

        Raises:
            ContextLengthError: HTTP 400 about the context length (not retried).
            PolicyHTTPError: any other non-2xx after retries (5xx) or at once (4xx; a 404 names the route).
            PolicyConnectionError: every server failed or is down.
            PolicyProtocolError: ``input_ids`` cannot be NeMo RL's prompt (no EOS; a tail the server's template does
                not reproduce), or the server sampled from other ids than ``input_ids``, or an answer without ids.
        """
        held = list(input_ids)
        prefix, tail = split_at_last_eos(held, self.eos, rid)
        episode = (rid or "").rpartition("-")[0] or None
        preferred = self._affinity.get(episode) if episode else None
        replicas = _Sticky(self.replicas.guards, self.replicas._turn, self._guard(preferred))
        fields = {"required_prefix_token_ids": prefix, "messages": list(PROBE_MESSAGES)}
        if self.model is not None:
            fields["model"] = self.model

        payload = {**fields, **chat_sampling(sampling_params), "logprobs": True, "top_logprobs": 0}
        for url in self.urls:
            if tuple(tail) not in self._proven[url]:
                prove = functools.partial(self._prove, url, fields, held, tail, headers, rid)
                await self._once((url, tuple(tail)), prove)
        checks = "tau_policy_url and tau_policy_model" if self.model else "tau_policy_url"
        with not_found_hint(f"NeMo RL's vLLM server serves POST /v1/chat/completions (check {checks})"):
            answer = await post_json_on_replicas(
                self._http,
                "/v1/chat/completions",
                lambda _url: payload,
                headers,
                self.retry,
                rid,
                replicas,
                self._remember(episode),
            )
        return parse_chat_response(answer, held, rid)

    def _guard(self, url: str | None) -> EndpointGuard | None:
        return next((g for g in self.replicas.guards if g.url == url), None)

    def _remember(self, episode: str | None) -> Callable[[str], None]:
        def sent_to(url: str) -> None:
            if episode:
                self._affinity[episode] = url
                self._affinity.move_to_end(episode)
                while len(self._affinity) > AFFINITY_LIMIT:
                    self._affinity.popitem(last=False)

        return sent_to

    async def _once(self, key: tuple[str, tuple[int, ...]], prove: Callable[[], Awaitable[None]]) -> None:
        """``prove()`` (:meth:`_prove`), once for all the episodes of this loop that wait on the same server and
        tail, ``key`` (the proof depends only on the tail: the server keeps the prefix as sent)."""
        loop_key = (id(asyncio.get_running_loop()), *key)
        running = self._proving.get(loop_key)
        if running is None:
            running = asyncio.ensure_future(prove())
            self._proving[loop_key] = running
            running.add_done_callback(lambda _f: self._proving.pop(loop_key, None))
        await asyncio.shield(running)

    async def _prove(
        self,
        url: str,
        fields: dict[str, Any],
        held: list[int],
        tail: Sequence[int],
        headers: dict[str, str] | None,
        rid: str | None,
    ) -> None:
        """``/tokenize`` on ``url`` with the request's own prefix and messages must give back ``held``: the server's
        template reproduces our generation prompt ``tail``. Proven once per server and tail.

        Raises:
            PolicyProtocolError: it gives other ids (the first differing position is named).
        """
        guard = self._guard(url)
        one = ReplicaSet((guard,)) if guard is not None else self.replicas
        answer = await post_json_on_replicas(
            {url: self._http[url]}, "/tokenize", lambda _u: fields, headers, self.retry, rid, one
        )
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            raise PolicyProtocolError(f"{url}/tokenize answered no tokens (rid={rid}): {str(answer)[:200]!r}")
        if tokens != held:
            raise PolicyProtocolError(
                f"{url} would not sample from the held ids ({first_difference(held, tokens)}): its chat template's "
                f"generation prompt is not the one ours ends with ({len(tail)} ids after the last EOS); use the "
                "policy's own tokenizer folder and chat-template settings (tau_tokenizer_path, tau_chat_template_*)"
            )
        self._proven[url].add(tuple(tail))


def split_at_last_eos(ids: Sequence[int], eos: int, rid: str | None = None) -> tuple[list[int], list[int]]:
    """``ids`` as (everything up to and including the last EOS, the rest): NeMo RL's prefix and what its template
    must add.

    Raises:
        PolicyProtocolError: ``ids`` hold no EOS (NeMo RL splices only at one).
    """
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] == eos:
            return list(ids[: i + 1]), list(ids[i + 1 :])
    raise PolicyProtocolError(
        f"the prompt holds no EOS token (id {eos}), where NeMo RL splices its prefix (rid={rid}); "
        "the tokenizer's eos_token must close each chat message (an instruct model's tokenizer)"
    )


def chat_sampling(sampling_params: dict[str, Any]) -> dict[str, Any]:
    """SGLang-named sampling parameters as a chat-completions body; ``temperature`` and ``top_p`` always (NeMo RL
    refuses an unset ``top_p``: vLLM would take the model's own default, off-policy)."""
    fields = openai_sampling(sampling_params)
    fields.setdefault("temperature", 1.0)
    fields.setdefault("top_p", 1.0)
    if fields.get("top_k") in (None, -1, 0):  # NeMo RL allows only "unset"
        fields.pop("top_k", None)
    fields.update(include_stop_str_in_output=True, skip_special_tokens=False, stream=False)
    return fields


def parse_chat_response(body: Any, held: Sequence[int], rid: str | None = None) -> GenerateResult:
    """A NeMo RL chat answer as a :class:`GenerateResult`, after checking it sampled from ``held`` exactly.

    Raises:
        PolicyProtocolError: no single choice, an unknown finish reason, no token information (the server is not
            NeMo RL's), ids and log-probs that disagree, or a prompt other than ``held``.
    """
    choice, finish = single_choice(body, "/v1/chat/completions", rid)
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    prompt, ids, lps = (message.get(k) for k in ("prompt_token_ids", "generation_token_ids", "generation_log_probs"))
    if not (isinstance(prompt, list) and isinstance(ids, list) and isinstance(lps, list)):
        raise PolicyProtocolError(
            f"the chat answer has no prompt_token_ids/generation_token_ids/generation_log_probs (rid={rid}): "
            "the server is not NeMo RL's vLLM server (plain vLLM: use tau_policy_api: openai-completions)"
        )
    if prompt != list(held):
        raise PolicyProtocolError(
            f"the server sampled from other ids than ours (rid={rid}): {first_difference(held, prompt)}"
        )
    if len(ids) != len(lps) or not all(isinstance(x, (int, float)) for x in lps):
        raise PolicyProtocolError(f"{len(ids)} generated ids but {len(lps)} log-probs (rid={rid})")
    meta: dict[str, Any] = {"id": body.get("id"), "finish_reason": {"type": finish.value, "matched": None}}
    if finish is FinishReason.STOP and ids:
        meta["finish_reason"]["matched"] = ids[-1]
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    for key in ("prompt_tokens", "completion_tokens"):
        if isinstance(usage.get(key), int):
            meta[key] = usage[key]
    return GenerateResult(tuple(int(t) for t in ids), tuple(float(x) for x in lps), finish, meta)


def first_difference(ours: Sequence[int], theirs: Sequence[int]) -> str:
    """Where two id sequences first differ, in words."""
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return f"position {i}: ours {a}, the server's {b}"
    return f"lengths differ: ours {len(ours)}, the server's {len(theirs)}"
