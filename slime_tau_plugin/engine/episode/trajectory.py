"""Token-exact bookkeeping of one episode: held ids, loss mask, log-probs and budgets.

This module owns the TITO and mask invariants (docs/ARCHITECTURE.md, Invariants). It stores what the server
generated unchanged (mask 1, with its log-probs and SGLang ``meta_info``) and template continuations (mask 0,
log-prob 0.0), checks lengths on every append, and derives the flat views slime wants. It knows nothing about
slime, HTTP or τ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of response ids that share one trainability."""

    ids: tuple[int, ...]
    """Token ids, exactly as generated (model turns) or as the chat template produced them."""
    log_probs: tuple[float, ...]
    """One log-prob per id; 0.0 for non-trainable ids."""
    is_trainable: bool
    """True only for ids the policy sampled."""
    meta_info: dict[str, Any] | None = None
    """SGLang's ``meta_info`` of the generation that produced a trainable segment."""

    @property
    def weight_version(self) -> str | None:
        """The policy weights that sampled a trainable segment (SGLang's ``meta_info.weight_version``)."""
        version = (self.meta_info or {}).get("weight_version") if self.is_trainable else None
        return None if version is None else str(version)


@dataclass(slots=True)
class Trajectory:
    """Prompt ids plus an append-only list of response segments.

    ``ids`` is always what the next ``/generate`` request must send: the prompt, every generated id and
    every continuation id, in order, never re-tokenized.
    """

    prompt_ids: tuple[int, ...]
    segments: list[Segment] = field(default_factory=list)
    _response_len: int = 0
    _ids: list[int] = field(default_factory=list, init=False, repr=False)
    """Everything held, flat, kept up to date on append: a turn copies it instead of rebuilding it from the
    segments (a 30k-id episode rebuilt its list in ~1 ms of loop time per turn)."""

    def __post_init__(self) -> None:
        self.prompt_ids = tuple(self.prompt_ids)
        if not self.prompt_ids:
            raise ValueError("Trajectory needs a non-empty prompt (got 0 prompt ids)")
        self._ids = [*self.prompt_ids, *(t for seg in self.segments for t in seg.ids)]

    def add_model_turn(
        self, ids: Sequence[int], log_probs: Sequence[float], meta_info: dict[str, Any] | None = None
    ) -> None:
        """Append ids the policy sampled (mask 1)."""
        if len(ids) != len(log_probs):
            raise ValueError(f"model turn has {len(ids)} ids but {len(log_probs)} log-probs")
        if not ids:
            return
        self.segments.append(Segment(tuple(ids), tuple(float(x) for x in log_probs), True, meta_info))
        self._ids += ids
        self._response_len += len(ids)

    def without_training(self) -> Trajectory:
        """The same ids with nothing trainable (a failed episode keeps its tokens for inspection only)."""
        frozen = [Segment(seg.ids, (0.0,) * len(seg.ids), False) for seg in self.segments]
        return Trajectory(self.prompt_ids, frozen, self._response_len)

    def add_continuation(self, ids: Sequence[int]) -> None:
        """Append template glue, tool output or user text (mask 0, log-prob 0.0)."""
        if not ids:
            return
        self.segments.append(Segment(tuple(ids), (0.0,) * len(ids), False))
        self._ids += ids
        self._response_len += len(ids)

    @property
    def response_length(self) -> int:
        return self._response_len

    @property
    def response_ids(self) -> list[int]:
        return self._ids[len(self.prompt_ids) :]

    @property
    def ids(self) -> list[int]:
        """Everything held: what the next request sends as ``input_ids`` (a copy: a C-level list copy)."""
        return list(self._ids)

    def __len__(self) -> int:
        return len(self.prompt_ids) + self._response_len

    @property
    def loss_mask(self) -> list[int]:
        return [1 if seg.is_trainable else 0 for seg in self.segments for _ in seg.ids]

    @property
    def rollout_log_probs(self) -> list[float]:
        return [lp for seg in self.segments for lp in seg.log_probs]

    @property
    def num_trainable(self) -> int:
        return sum(len(seg.ids) for seg in self.segments if seg.is_trainable)

    def __repr__(self) -> str:
        return (
            f"Trajectory(prompt={len(self.prompt_ids)}, response={self._response_len}, "
            f"trainable={self.num_trainable}, segments={len(self.segments)})"
        )


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """Limits that keep every request acceptable to the server (no HTTP 400 for context overflow)."""

    max_context_len: int
    """Prompt + response may never exceed this."""
    max_response_len: int | None = None
    """Total response ids (model + continuation) may never exceed this."""
    max_tokens_per_turn: int | None = None
    """Cap on one generation's ``max_new_tokens``."""

    def __post_init__(self) -> None:
        if self.max_context_len < 2:
            raise ValueError(f"max_context_len must be >= 2, got {self.max_context_len}")
        for name in ("max_response_len", "max_tokens_per_turn"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")

    def max_new_tokens(self, traj: Trajectory, used_this_turn: int = 0) -> int:
        """How many ids the next generation may produce; <= 0 means the budget is exhausted.

        ``used_this_turn``: ids the turn already has (a turn cut mid-generation and resumed): the per-turn cap
        covers the whole turn.
        """
        room = self.max_context_len - len(traj)
        if self.max_response_len is not None:
            room = min(room, self.max_response_len - traj.response_length)
        if self.max_tokens_per_turn is not None:
            room = min(room, self.max_tokens_per_turn - used_this_turn)
        return room

    def fits(self, traj: Trajectory, extra: int) -> bool:
        """Whether ``extra`` more non-trainable ids plus at least one generated id still fit."""
        if len(traj) + extra + 1 > self.max_context_len:
            return False
        if self.max_response_len is not None and traj.response_length + extra + 1 > self.max_response_len:
            return False
        return True
