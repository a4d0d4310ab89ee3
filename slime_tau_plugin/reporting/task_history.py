"""The run's per-task record: attempts, passes, pass rate and the last step each training task was seen.

One JSON file in the run folder (``tau_task_record.json``), rewritten atomically after every training step
(a temporary file, then ``os.replace``), so a crash leaves the previous step's record, never half of one. A
restart reads it back. Steps are keyed by slime's rollout id: :meth:`TaskRecord.add_step` counts a step only
when its id is above the last one counted, so a run resumed from an older checkpoint (slime's ``--load``
replays the rollout ids after it) never counts a step twice; the replayed steps are left as first seen.

Only evidence counts (the one rule of ``summary.left_out``: a FAILED or deadline episode says nothing about the
model). A task is ``<benchmark>/<domain>/<task id>``. Trainer-free: samples are read by slime's field names.
Wire format (version 1)::

    {"version": 1, "last_step": 12,
     "tasks": {"tau2/retail/7": {"domain": "tau2/retail", "task_id": "7", "attempts": 16, "passes": 12,
                                 "last_step": 12, "recent": "1101"}},
     "steps": {"12": {"tau2/retail": [32, 20]}},
     "curriculum": {"step": 12, "down_weighted": ["tau2/retail/7"]}}

``recent`` holds the task's last :data:`RECENT_KEEP` outcomes, oldest first (``1`` = pass); ``steps`` the last
:data:`STEPS_KEEP` steps' attempts and passes per domain (the train pass rate the held-out check compares with).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.reporting.summary import is_success, left_out, tau_reward

logger = logging.getLogger(__name__)

__all__ = ["RECORD_FILE", "TaskOutcome", "TaskRecord", "TaskStats", "task_of", "task_outcomes"]

RECORD_FILE = "tau_task_record.json"
RECENT_KEEP = 64
"""Outcomes kept per task: the longest curriculum window (``tau_curriculum_window``)."""
STEPS_KEEP = 500
"""Steps whose per-domain totals are kept: the longest train window (``tau_train_window_steps``)."""
VERSION = 1


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """One training episode that is evidence: which task, and whether τ's reward was a pass."""

    task: str
    """``<benchmark>/<domain>/<task id>``."""
    domain: str
    """``<benchmark>/<domain>``."""
    task_id: str
    passed: bool


@dataclass(slots=True)
class TaskStats:
    """One task's counts so far (mutable: the record owns it and updates it once per step)."""

    domain: str
    task_id: str
    attempts: int = 0
    passes: int = 0
    last_step: int = -1
    recent: str = ""
    """The last outcomes, oldest first, ``1`` = pass."""

    @property
    def pass_rate(self) -> float:
        return self.passes / self.attempts if self.attempts else 0.0


def task_outcomes(samples: Iterable[Any], default_domain: str) -> list[TaskOutcome]:
    """The evidence among ``samples`` (slime's field names) as outcomes; samples without a task id or without
    our metadata (``termination_reason``) are skipped."""
    out: list[TaskOutcome] = []
    for sample in samples:
        meta = getattr(sample, "metadata", None)
        if not isinstance(meta, dict) or "termination_reason" not in meta or left_out(sample):
            continue
        where = task_of(meta, default_domain)
        if where is not None:
            out.append(TaskOutcome(f"{where[0]}/{where[1]}", *where, is_success(tau_reward(sample))))
    return out


def task_of(meta: Any, default_domain: str) -> tuple[str, str] | None:
    """``(<benchmark>/<domain>, task id)`` a row's or sample's metadata names; None without a task id."""
    task_id = task_id_of(meta) if isinstance(meta, dict) else None
    if task_id is None:
        return None
    bench, dom = meta.get("benchmark"), meta.get("domain")
    return (f"{bench}/{dom}" if bench and dom else default_domain), task_id


@dataclass(slots=True)
class TaskRecord:
    """The record in memory; :meth:`load` and :meth:`save` are its file."""

    tasks: dict[str, TaskStats] = field(default_factory=dict)
    steps: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    last_step: int = -1
    down_weighted: tuple[int, list[str]] = (-1, [])
    """The curriculum's last word: (step, tasks drawn less), kept so the file says it too."""

    def add_step(self, step: int, outcomes: Iterable[TaskOutcome]) -> bool:
        """Count one training step; False (nothing counted) when ``step`` was counted already."""
        if step <= self.last_step:
            logger.info(
                "tau task record: step %d was counted before (last %d); not counted again", step, self.last_step
            )
            return False
        per_domain: dict[str, list[int]] = {}
        for o in outcomes:
            stats = self.tasks.setdefault(o.task, TaskStats(o.domain, o.task_id))
            stats.attempts += 1
            stats.passes += o.passed
            stats.last_step = step
            stats.recent = (stats.recent + ("1" if o.passed else "0"))[-RECENT_KEEP:]
            totals = per_domain.setdefault(o.domain, [0, 0])
            totals[0] += 1
            totals[1] += o.passed
        self.steps[step] = per_domain
        for old in sorted(self.steps)[:-STEPS_KEEP]:
            del self.steps[old]
        self.last_step = step
        return True

    def train_pass_rate(self, domain: str, through_step: int, window_steps: int) -> tuple[float, int] | None:
        """Pass rate and attempts of ``domain``'s training episodes over the steps ``through_step - window_steps``
        (exclusive) to ``through_step`` (inclusive); None when none was played there."""
        attempts = passes = 0
        for step, per_domain in self.steps.items():
            if through_step - window_steps < step <= through_step and domain in per_domain:
                attempts += per_domain[domain][0]
                passes += per_domain[domain][1]
        return (passes / attempts, attempts) if attempts else None

    def to_json(self) -> dict[str, Any]:
        step, down = self.down_weighted
        return {
            "version": VERSION,
            "last_step": self.last_step,
            "tasks": {
                name: {
                    "domain": s.domain,
                    "task_id": s.task_id,
                    "attempts": s.attempts,
                    "passes": s.passes,
                    "pass_rate": round(s.pass_rate, 6),
                    "last_step": s.last_step,
                    "recent": s.recent,
                }
                for name, s in sorted(self.tasks.items())
            },
            "steps": {str(k): v for k, v in sorted(self.steps.items())},
            "curriculum": {"step": step, "down_weighted": down},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskRecord:
        """Raises: ValueError (or KeyError/TypeError) on a file that is not a version-1 record."""
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
        tasks = {
            name: TaskStats(
                str(t["domain"]),
                str(t["task_id"]),
                int(t["attempts"]),
                int(t["passes"]),
                int(t["last_step"]),
                str(t.get("recent", "")),
            )
            for name, t in data["tasks"].items()
        }
        steps = {int(k): {d: [int(a), int(p)] for d, (a, p) in v.items()} for k, v in data["steps"].items()}
        cur = data.get("curriculum") or {}
        return cls(tasks, steps, int(data["last_step"]), (int(cur.get("step", -1)), list(cur.get("down_weighted", []))))

    @classmethod
    def load(cls, path: Path) -> TaskRecord:
        """The record at ``path``; an empty one when there is none or it cannot be read. A file that does not read
        as a record is moved aside (``.bad``) with a warning: the run goes on with a fresh record rather than
        stopping."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except OSError as exc:  # unreadable storage: the run goes on with a fresh record, as with a bad file
            logger.warning("tau task record %s cannot be read (%s); starting fresh", path, exc)
            return cls()
        try:
            return cls.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            bad = path.with_suffix(path.suffix + ".bad")
            with contextlib.suppress(OSError):  # read-only storage: the next save fails and says so
                os.replace(path, bad)
            logger.warning(
                "tau task record %s does not read as a record (%s); moved to %s, starting fresh", path, exc, bad
            )
            return cls()

    def save(self, path: Path) -> None:
        """Write atomically: a temporary file in the same folder, then ``os.replace``.

        Raises:
            OSError: the folder cannot be written (the caller logs it; the run goes on).
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self.to_json(), out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
