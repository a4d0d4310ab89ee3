"""Which task an episode plays (:class:`TaskRef`) and the one reading of a task id from row metadata.

Rows name a τ² task by ``task_id`` and a τ-bench v1 task by ``task_index`` (slime's own τ example
does); :func:`task_id_of` is the only place that knows both spellings. Imports nothing from the package,
so ``envs/`` and ``episode.py`` both depend on it and not on each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TASK_ID_KEYS = ("task_id", "task_index")
"""Metadata keys that name a task: τ²'s id, then v1's index."""
UNKNOWN_TASK_ID = "?"
"""The task id of an episode that failed before its task was known."""


@dataclass(frozen=True, slots=True)
class TaskRef:
    """Which task an episode plays: uniform across τ versions."""

    benchmark: str
    """``tau1`` or ``tau2``."""
    domain: str
    split: str
    task_id: str
    """τ² task id, or the v1 task index as a string."""
    task: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    """The task as dumped by ``slime-tau prepare`` (used instead of a lookup when present)."""

    @property
    def id_key(self) -> str:
        """The metadata key rows use for this task's id (``task_index`` for v1, else ``task_id``)."""
        return "task_index" if self.benchmark == "tau1" else "task_id"

    def __str__(self) -> str:
        return f"{self.benchmark}/{self.domain}/{self.split}/{self.task_id}"


def task_id_of(metadata: Mapping[str, Any] | None) -> str | None:
    """The task id a row's metadata names (``task_id``, else ``task_index``) as a string, or None."""
    for key in TASK_ID_KEYS:
        value = (metadata or {}).get(key)
        if value is not None:
            return str(value)
    return None
