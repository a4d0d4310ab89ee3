"""FakePolicy: the model being trained, behind ``policy.PolicyClient`` (see ``tests.fakes``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.errors import ContextLengthError, PolicyError
from slime_tau_plugin.engine.policy.client import FinishReason, GenerateResult

from .tokenizer import FakeTokenizer


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic log-prob in (-1, 0) that depends on the id and its absolute position in the sequence."""
    return -(((token_id * 31 + position * 17) % 997) + 1) / 1000.0


@dataclass(frozen=True, slots=True)
class FakeTurn:
    """One scripted generation."""

    text: str = ""
    finish: FinishReason = FinishReason.STOP
    is_closed: bool = True
    """Append the tokenizer's end-of-turn ids (only with ``STOP``; False = a stop string ended the turn)."""
    error: PolicyError | None = None
    """Raise this instead of generating."""


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """One ``generate`` call as the fake received it, with what it answered (None when it raised)."""

    input_ids: tuple[int, ...]
    sampling_params: dict[str, Any]
    rid: str | None
    headers: dict[str, str] | None
    result: GenerateResult | None


class FakePolicy:
    """A :class:`~slime_tau_plugin.engine.policy.client.PolicyClient` that plays :class:`FakeTurn` replies in order.

    Like SGLang it keeps the stop id in ``output_ids``, cuts a reply at ``max_new_tokens`` (finish ``length``)
    and, given ``context_len``, refuses ``input + max_new_tokens > context_len`` with a ``ContextLengthError``.
    Running out of turns raises ``AssertionError``: the test scripted too few.
    """

    def __init__(self, tokenizer: FakeTokenizer, turns: Sequence[FakeTurn | str], context_len: int | None = None):
        self.tokenizer = tokenizer
        self.eot_ids = tokenizer.encode(tokenizer.eos_token)
        self.turns = [t if isinstance(t, FakeTurn) else FakeTurn(t) for t in turns]
        self.context_len = context_len
        self.requests: list[PolicyRequest] = []

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult:
        request = (tuple(input_ids), dict(sampling_params), rid, headers)
        n = len(self.requests)
        assert n < len(self.turns), f"FakePolicy got request {n + 1} but only {len(self.turns)} turns are scripted"
        turn, max_new = self.turns[n], sampling_params.get("max_new_tokens")
        error = turn.error
        if error is None and self.context_len is not None and len(input_ids) + (max_new or 0) > self.context_len:
            error = ContextLengthError(
                f"input ({len(input_ids)} tokens) + max_new_tokens ({max_new}) exceeds the context length "
                f"({self.context_len})",
                status=400,
                body="",
            )
        if error is not None:
            self.requests.append(PolicyRequest(*request, None))
            raise error
        ids = self.tokenizer.encode(turn.text)
        closed = turn.is_closed and turn.finish is FinishReason.STOP
        ids, finish = ids + (self.eot_ids if closed else []), turn.finish
        if max_new is not None and len(ids) > max_new:
            ids, finish = ids[:max_new], FinishReason.LENGTH if finish is FinishReason.STOP else finish
        start = len(input_ids)
        result = GenerateResult(
            tuple(ids),
            tuple(fake_logprob(t, start + i) for i, t in enumerate(ids)),
            finish,
            {"finish_reason": {"type": finish.value}, "prompt_tokens": start, "completion_tokens": len(ids)},
        )
        self.requests.append(PolicyRequest(*request, result))
        return result


# --- the τ seam (envs.base.EnvBackend / EnvSession) ------------------------------------------------------
