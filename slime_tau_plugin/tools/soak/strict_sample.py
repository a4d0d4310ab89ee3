"""The ``Sample`` the soak fills: slime's own (``slime.utils.types.Sample``) when importable, else a strict one.

slime is not on PyPI, so a CPU box has no real ``Sample``. :class:`StrictSample` has slime's fields, its
``Status`` enum and the rules of ``append_response_tokens`` (written from slime's source, 2026-08; the
plugin's contract tests use it too, as ``tests/contracts/slime_sample.Sample``): log-probs required for
trainable tokens and forbidden for non-trainable ones, lengths checked after every append, terminal info
(status from ``finish_reason``, weight versions, prefix-cache statistics) applied from ``meta_info``, and
non-trainable appends padding top-p replay offsets with empty spans (plain lists; slime uses int32 tensors).
A broken rule raises ``ValueError`` inside ``generate``, which the soak counts as an exception that escaped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


def sample_class() -> tuple[type, str]:
    """slime's ``Sample`` and ``"slime"``, or :class:`StrictSample` and ``"strict stand-in"``."""
    try:
        from slime.utils.types import Sample  # type: ignore[import-not-found]
    except ImportError:
        return StrictSample, "strict stand-in"
    return Sample, "slime"


@dataclass
class PrefixCacheInfo:
    cached_tokens: int = 0
    total_prompt_tokens: int = 0

    def add(self, meta_info: dict[str, Any]) -> None:
        self.cached_tokens += meta_info.get("cached_tokens", 0)
        self.total_prompt_tokens += meta_info.get("prompt_tokens", 0)


@dataclass
class StrictSample:
    """slime's ``Sample``: its fields, its ``Status`` and the checks of ``append_response_tokens``."""

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: Any = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_top_p_token_ids: list[int] | None = None
    rollout_top_p_token_offsets: list[int] | None = None
    rollout_routed_experts: Any = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None
    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    session_id: str | None = None
    non_generation_time: float = 0.0
    """Seconds spent outside generation (slime's rollout perf metrics subtract it)."""
    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def append_response_tokens(
        self,
        args: Any = None,
        *,
        tokens: list[int] | None = None,
        log_probs: list[float] | None = None,
        trainable: bool = True,
        meta_info: dict[str, Any] | None = None,
        text: str | None = None,
        update_terminal_info: bool = True,
    ) -> None:
        tokens = [int(t) for t in (tokens or [])]
        log_probs = None if log_probs is None else [float(x) for x in log_probs]
        n = len(tokens)
        if log_probs is not None and len(log_probs) != n:
            raise ValueError(f"log_probs length {len(log_probs)} != tokens length {n}")
        if n and trainable and log_probs is None:
            raise ValueError("trainable response tokens require rollout log probabilities.")
        if n and not trainable:
            if log_probs is not None:
                raise ValueError("non-trainable response tokens should not pass rollout log probabilities.")
            log_probs = [0.0] * n
        if text is not None:
            self.response += text
        prev = self.response_length
        if n:
            self.tokens = self.tokens + tokens
            self.response_length += n
            if self.loss_mask is None:
                self.loss_mask = [1] * prev
            self.loss_mask = self.loss_mask + [1 if trainable else 0] * n
        if log_probs is not None:
            if self.rollout_log_probs is None:
                if trainable and prev > 0:
                    raise ValueError(
                        "Cannot append trainable rollout log probabilities to a sample with existing response "
                        "tokens but no existing rollout_log_probs."
                    )
                self.rollout_log_probs = [0.0] * prev
            self.rollout_log_probs = self.rollout_log_probs + log_probs
        pad = bool(tokens and not trainable)
        if meta_info is not None or pad:
            self._apply_meta_info(meta_info or {}, n, pad, update_terminal_info)
        self._validate_response_metadata_lengths()

    def _apply_meta_info(self, meta: dict[str, Any], n: int, pad: bool, update_terminal_info: bool) -> None:
        applied = False
        ids, offsets = meta.get("top_p_token_ids"), meta.get("top_p_token_offsets")
        if n and (ids is not None or offsets is not None):
            if ids is None or offsets is None:
                raise ValueError("top-p replay data needs both token ids and offsets")
            if not offsets or offsets[0] != 0 or offsets[-1] != len(ids) or len(offsets) != n + 1:
                raise ValueError("top-p offsets do not describe the new tokens")
            if self.rollout_top_p_token_ids is None:
                self.rollout_top_p_token_ids, self.rollout_top_p_token_offsets = list(ids), list(offsets)
            else:
                base = self.rollout_top_p_token_offsets[-1]
                self.rollout_top_p_token_ids += list(ids)
                self.rollout_top_p_token_offsets += [o + base for o in offsets[1:]]
            applied = True
        if pad and n and self.rollout_top_p_token_offsets is not None and not applied:
            self.rollout_top_p_token_offsets += [self.rollout_top_p_token_offsets[-1]] * n
        if not update_terminal_info or "finish_reason" not in meta:
            return
        self.prefix_cache_info.add(meta)
        if "weight_version" in meta:
            self.weight_versions.append(meta["weight_version"])
        kind = meta["finish_reason"]["type"]
        if kind == "length":
            self.status = self.Status.TRUNCATED
        elif kind == "abort":
            self.status = self.Status.ABORTED
        elif kind == "stop":
            self.status = self.Status.COMPLETED

    def _validate_response_metadata_lengths(self) -> None:
        if self.loss_mask is not None and len(self.loss_mask) != self.response_length:
            raise ValueError(f"loss_mask length {len(self.loss_mask)} != response_length {self.response_length}")
        if self.rollout_log_probs is not None and len(self.rollout_log_probs) != self.response_length:
            raise ValueError(
                f"rollout_log_probs length {len(self.rollout_log_probs)} != response_length {self.response_length}"
            )
        if self.rollout_top_p_token_ids is None and self.rollout_top_p_token_offsets is None:
            return
        if self.rollout_top_p_token_offsets is None or self.rollout_top_p_token_ids is None:
            raise ValueError("top-p ids and offsets must both be set")
        if len(self.rollout_top_p_token_offsets) != self.response_length + 1:
            raise ValueError("top-p offsets must have response_length + 1 entries")
        if self.rollout_top_p_token_offsets[-1] != len(self.rollout_top_p_token_ids):
            raise ValueError("last top-p offset must equal the number of top-p ids")
