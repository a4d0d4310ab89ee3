"""The ``Sample`` the soak fills: slime's own (``slime.utils.types.Sample``) when importable, else a strict one.

slime is not on PyPI, so a CPU box has no real ``Sample``. :class:`StrictSample` keeps the rules
``generate`` must obey to be accepted by slime's ``append_response_tokens`` (the plugin's contract tests keep
the full stand-in under ``tests/``, which the package cannot import): trainable tokens need log-probs,
non-trainable ones must not bring any, ``loss_mask`` and ``rollout_log_probs`` stay ``response_length`` long
after every append, and a ``finish_reason`` in ``meta_info`` sets the status. A broken rule raises
``ValueError`` inside ``generate``, which the soak counts as an exception that escaped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


def sample_class() -> tuple[type, str]:
    """slime's ``Sample`` and ``"slime"``, or :class:`StrictSample` and ``"strict stand-in"``."""
    try:
        from slime.utils.types import Sample  # type: ignore[import-not-found]
    except ImportError:
        return StrictSample, "strict stand-in"
    return Sample, "slime"


@dataclass
class StrictSample:
    """slime's ``Sample`` fields that ``generate`` writes, and the checks of ``append_response_tokens``."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    group_index: int | None = None
    index: int | None = None
    prompt: Any = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    reward: float | dict | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    remove_sample: bool = False
    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    session_id: str | None = None
    non_generation_time: float = 0.0

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
        """Append one segment of the response, refusing what slime refuses (``ValueError``)."""
        new = [int(t) for t in tokens or []]
        probs = None if log_probs is None else [float(x) for x in log_probs]
        if probs is not None and len(probs) != len(new):
            raise ValueError(f"log_probs length {len(probs)} != tokens length {len(new)}")
        if new and trainable and probs is None:
            raise ValueError("trainable response tokens require rollout log probabilities")
        if new and not trainable:
            if probs is not None:
                raise ValueError("non-trainable response tokens must not carry rollout log probabilities")
            probs = [0.0] * len(new)
        if text is not None:
            self.response += text
        before = self.response_length
        if new:
            self.tokens = [*self.tokens, *new]
            self.response_length += len(new)
            self.loss_mask = [*(self.loss_mask if self.loss_mask is not None else [1] * before)]
            self.loss_mask += [1 if trainable else 0] * len(new)
        if probs is not None:
            if self.rollout_log_probs is None:
                if trainable and before > 0:
                    raise ValueError("trainable log probabilities appended to a response that has none")
                self.rollout_log_probs = [0.0] * before
            self.rollout_log_probs = [*self.rollout_log_probs, *probs]
        if meta_info and update_terminal_info and "finish_reason" in meta_info:
            self._finish(meta_info)
        self._check_lengths()

    def _finish(self, meta: dict[str, Any]) -> None:
        if "weight_version" in meta:
            self.weight_versions.append(meta["weight_version"])
        kind = meta["finish_reason"]["type"]
        status = {"length": self.Status.TRUNCATED, "abort": self.Status.ABORTED, "stop": self.Status.COMPLETED}
        self.status = status.get(kind, self.status)

    def _check_lengths(self) -> None:
        for name in ("loss_mask", "rollout_log_probs"):
            values = getattr(self, name)
            if values is not None and len(values) != self.response_length:
                raise ValueError(f"{name} length {len(values)} != response_length {self.response_length}")
