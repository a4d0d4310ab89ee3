"""The curriculum's rule: a task always solved or never solved over its last attempts is drawn less.

A weight, not a removal. A task whose last ``window`` evidence episodes (``TaskStats.recent``) all passed or all
failed has weight ``floor``; any other task, and one with fewer attempts than the window, weight 1. A data source
asks :meth:`CurriculumDraws.keep` for each group it draws: a group of weight w is kept with probability w, else it
is skipped and the next one drawn, so a saturated task comes up about ``floor`` times as often as before and
comes back at full weight as soon as one outcome in its window differs. The draw for a group is a pure function
of the seed, the group's index and its task's weight, so it is reproducible. Trainer-free; the slime data source is
``adapters/slime/curriculum.py``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from slime_tau_plugin.reporting.task_history import TaskStats

__all__ = ["CurriculumDraws", "CurriculumSettings", "CurriculumStep", "down_weighted", "task_weight"]


@dataclass(frozen=True, slots=True)
class CurriculumSettings:
    """``tau_curriculum_window`` and ``tau_curriculum_floor`` (checked by ``TauKeys``)."""

    window: int
    """Attempts a task's verdict is read from (its most recent evidence episodes)."""
    floor: float
    """Weight of a task saturated over its window, in (0, 1]."""
    seed: int = 0


@dataclass(frozen=True, slots=True)
class CurriculumStep:
    """What one training step's draws did (the metrics ``rollout/tau/curriculum/*``)."""

    looked_at: int
    """Fresh groups drawn from the dataset (skipped ones included)."""
    skipped: int
    """Groups of a down-weighted task not taken this time."""
    down_weighted: tuple[str, ...]
    """Every task in the record at less than full weight, sorted."""

    @property
    def drawn_down_share(self) -> float:
        return self.skipped / self.looked_at if self.looked_at else 0.0


def task_weight(stats: TaskStats | None, settings: CurriculumSettings) -> float:
    """1.0, or ``settings.floor`` when the task's last ``window`` outcomes all agree."""
    if stats is None or len(stats.recent) < settings.window:
        return 1.0
    last = stats.recent[-settings.window :]
    return settings.floor if len(set(last)) == 1 else 1.0


def down_weighted(tasks: Mapping[str, TaskStats], settings: CurriculumSettings) -> tuple[str, ...]:
    """The tasks at less than full weight."""
    return tuple(sorted(name for name, stats in tasks.items() if task_weight(stats, settings) < 1.0))


class CurriculumDraws:
    """Keeps or skips drawn groups by their task's weight and counts what it did since the last :meth:`take`."""

    def __init__(self, settings: CurriculumSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._looked_at = 0
        self._skipped = 0

    def keep(self, stats: TaskStats | None, group_index: int) -> bool:
        """Whether to take a group of this task (drawn with this index) now."""
        weight = task_weight(stats, self.settings)
        kept = weight >= 1.0 or random.Random(f"{self.settings.seed}/{group_index}").random() < weight
        with self._lock:
            self._looked_at += 1
            self._skipped += not kept
        return kept

    def max_looks(self, wanted: int) -> int:
        """How many groups a draw of ``wanted`` may look at before it takes the rest as they come (a bound, so a
        dataset of saturated tasks costs about ``wanted / floor`` draws and never loops)."""
        return 4 * int(wanted / self.settings.floor + 1) + 16

    def take(self, tasks: Mapping[str, TaskStats]) -> CurriculumStep:
        """This step's numbers (and start counting the next step's)."""
        with self._lock:
            looked_at, skipped, self._looked_at, self._skipped = self._looked_at, self._skipped, 0, 0
        return CurriculumStep(looked_at, skipped, down_weighted(tasks, self.settings))
