"""The policy through verl's server manager: the ``PolicyClient`` of verl's ``TauAgentLoop`` (``agent_loop.py``).

verl gives every agent loop an ``LLMServerClient`` (``self.server_manager``); one turn is::

    await server_manager.generate(request_id=..., prompt_ids=[...], sampling_params={..., "logprobs": True,
                                  "max_new_tokens": N})
    -> TokenOutput(token_ids=[...], log_probs=[...] | None, routed_experts=array | None,
                   stop_reason="completed" | "aborted" | "stop" | "length" | "abort" | None,
                   num_preempted=int | None, extra_fields={"global_steps", "min_global_steps", ...})

``stop_reason`` depends on the engine: verl's vLLM server says ``completed`` for both a stop and a length
cut, verl's SGLang server passes SGLang's ``stop``/``length``/``abort`` through, the fully-async client
says ``length`` when its budget ran out. So ``aborted``/``abort`` is an abort, ``length`` a length cut, and
anything else is a length cut only when the turn used all ``max_new_tokens`` without ending on a stop id.

One :class:`VerlPolicy` serves one episode: it sends every turn under the episode's ``request_id`` (verl's
load balancer keeps a request id on one server, so each turn reuses the prefix cache), checks the prompt
against ``rollout.prompt_length`` on the first turn (a longer prompt cannot be padded into verl's batch), and
keeps ``routed_experts`` only in the newest turn's ``meta_info`` (each turn's array already covers the whole
sequence; keeping every turn's would grow quadratically). It never imports verl: it only calls the object.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.errors import PolicyConnectionError, PolicyError, PolicyProtocolError
from slime_tau_plugin.engine.net.retry import RetrySettings, retry_async
from slime_tau_plugin.engine.policy.client import FinishReason, GenerateResult

ABORT_REASONS = frozenset({"aborted", "abort"})
LENGTH_REASONS = frozenset({"length"})

META_STOP_REASON = "stop_reason"
"""``meta_info`` keys this client writes (and :meth:`VerlPolicy.summary` reads back)."""
META_NUM_PREEMPTED = "num_preempted"
META_EXTRA_FIELDS = "extra_fields"
META_ROUTED_EXPERTS = "routed_experts"


@dataclass(frozen=True, slots=True)
class VerlEpisodeSummary:
    """What verl wants from an episode's generations, beyond ids and log-probs."""

    num_preempted: int
    """Sum over turns; -1 when the engine reports none (verl's "not available")."""
    min_global_steps: Any
    """The oldest weight version (verl's ``global_steps``) that generated a turn; None if unknown."""
    max_global_steps: Any
    routed_experts: Any
    """The newest turn's routed experts (covering prompt and every id up to that turn), or None."""


class VerlPolicy:
    """One episode's policy client over verl's ``server_manager`` (see the module docstring)."""

    def __init__(
        self,
        server_manager: Any,
        request_id: str,
        *,
        max_prompt_len: int | None = None,
        stop_token_ids: Iterable[int] = (),
        timeout_s: float = 600.0,
        retry: RetrySettings | None = None,
    ) -> None:
        self.server_manager = server_manager
        self.request_id = request_id
        self.max_prompt_len = max_prompt_len
        self.stop_token_ids = frozenset(int(t) for t in stop_token_ids)
        self.timeout_s = timeout_s
        self.retry = retry or RetrySettings()
        self._turns: list[dict[str, Any]] = []
        self._routed_turn: dict[str, Any] | None = None

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult:
        """One turn through ``server_manager.generate`` (``rid`` and ``headers`` are not used: verl routes by
        the episode's ``request_id``).

        Raises:
            PolicyError: the first turn's prompt exceeds ``max_prompt_len``, or the server manager raised.
            PolicyConnectionError: it timed out or lost its server after retries.
            PolicyProtocolError: no log-probs, ids and log-probs disagree, or an empty turn that was not aborted.
        """
        if not self._turns and self.max_prompt_len is not None and len(input_ids) > self.max_prompt_len:
            raise PolicyError(
                f"the prompt has {len(input_ids)} tokens, more than verl's rollout.prompt_length="
                f"{self.max_prompt_len}; raise data.max_prompt_length (request_id={self.request_id})"
            )
        params = {**sampling_params, "logprobs": True}  # log-probs are required: they are trained on

        async def once() -> Any:
            try:
                return await asyncio.wait_for(
                    self.server_manager.generate(
                        request_id=self.request_id, prompt_ids=list(input_ids), sampling_params=params
                    ),
                    self.timeout_s,
                )
            except asyncio.TimeoutError as exc:
                raise PolicyConnectionError(
                    f"verl server_manager.generate gave no answer in {self.timeout_s}s (request_id={self.request_id})"
                ) from exc
            except (ConnectionError, OSError) as exc:
                raise PolicyConnectionError(f"{type(exc).__name__}: {exc} (request_id={self.request_id})") from exc
            except Exception as exc:  # the seam: verl's and Ray's errors become ours
                if type(exc).__module__.startswith("ray."):
                    raise PolicyConnectionError(f"{type(exc).__name__}: {exc} (request_id={self.request_id})") from exc
                raise PolicyError(
                    f"verl server_manager.generate failed: {type(exc).__name__}: {exc} (request_id={self.request_id})"
                ) from exc

        output = await retry_async(once, self.retry, (PolicyConnectionError,), f"request_id={self.request_id}")
        result = self._to_result(output, params.get("max_new_tokens"))
        self._turns.append(result.meta_info)
        return result

    def _to_result(self, output: Any, max_new_tokens: Any) -> GenerateResult:
        """verl's ``TokenOutput`` -> :class:`GenerateResult` (the only reader of a ``TokenOutput``)."""
        ids = tuple(int(t) for t in (getattr(output, "token_ids", None) or ()))
        raw_stop = getattr(output, "stop_reason", None)
        stop = str(raw_stop).lower() if raw_stop is not None else None
        log_probs = getattr(output, "log_probs", None)
        if stop in ABORT_REASONS:
            finish = FinishReason.ABORT
            if log_probs is None or len(log_probs) != len(ids):  # an aborted turn never trains: keep what is whole
                ids, log_probs = (), []
        elif stop in LENGTH_REASONS:
            finish = FinishReason.LENGTH
        elif max_new_tokens is not None and len(ids) >= int(max_new_tokens) and ids[-1] not in self.stop_token_ids:
            finish = FinishReason.LENGTH
        else:
            finish = FinishReason.STOP
        if log_probs is None:
            raise PolicyProtocolError(
                f"verl returned no log-probs (stop_reason={raw_stop!r}, request_id={self.request_id}); "
                "the rollout server must honour sampling_params['logprobs']"
            )
        if len(log_probs) != len(ids):
            raise PolicyProtocolError(
                f"verl returned {len(ids)} ids but {len(log_probs)} log-probs (request_id={self.request_id})"
            )
        if not ids and finish is not FinishReason.ABORT:
            raise PolicyProtocolError(
                f"verl returned no ids with stop_reason={raw_stop!r} (request_id={self.request_id}); "
                "verl's SGLang server does so when output ids and log-probs disagree"
            )
        meta: dict[str, Any] = {
            META_STOP_REASON: raw_stop,
            META_NUM_PREEMPTED: getattr(output, "num_preempted", None),
            META_EXTRA_FIELDS: dict(getattr(output, "extra_fields", None) or {}),
        }
        routed = getattr(output, "routed_experts", None)
        if routed is not None:
            if self._routed_turn is not None:
                self._routed_turn.pop(META_ROUTED_EXPERTS, None)  # superseded: the new array covers it
            meta[META_ROUTED_EXPERTS] = routed
            self._routed_turn = meta
        return GenerateResult(ids, tuple(float(x) for x in log_probs), finish, meta)

    def summary(self) -> VerlEpisodeSummary:
        """Preemptions, weight versions and routed experts over the turns generated so far."""
        preempted = [t[META_NUM_PREEMPTED] for t in self._turns if t.get(META_NUM_PREEMPTED) is not None]
        extras = [t[META_EXTRA_FIELDS] for t in self._turns]  # verl's client copies global_steps into min/max
        lows = [e.get("min_global_steps", e.get("global_steps")) for e in extras]
        highs = [e.get("max_global_steps", e.get("global_steps")) for e in extras]
        lows = [x for x in lows if x is not None]
        highs = [x for x in highs if x is not None]
        routed = self._routed_turn.get(META_ROUTED_EXPERTS) if self._routed_turn is not None else None
        return VerlEpisodeSummary(
            num_preempted=int(sum(preempted)) if preempted else -1,
            min_global_steps=min(lows) if lows else None,
            max_global_steps=max(highs) if highs else None,
            routed_experts=routed,
        )
