"""slime's side of the per-task record (``reporting/task_history.py``): where it lives, one per process,
what feeds it and what it adds to the metrics.

Where: ``tau_task_record_dir``, else slime's ``--save`` (the checkpoint folder, on storage every node sees and
read back by a ``--load`` resume); a run with neither keeps no record. On first use the record is read from there,
else from ``<--load>/tau_task_record.json`` (a resume into a new save folder). Fed by the all-samples hook
(``all_samples.process_all_samples``: every group a step drew, the dropped all-pass and all-fail ones included),
once per rollout id; read by the curriculum's data source (``curriculum.py``) and by the eval hook's held-out
check (:func:`heldout_metrics`). A record that cannot be written is logged and the run goes on. Imports no slime.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.reporting.curriculum_rule import CurriculumDraws
from slime_tau_plugin.reporting.task_history import RECORD_FILE, TaskRecord, task_outcomes

logger = logging.getLogger(__name__)

__all__ = ["RunRecord", "forget_records", "heldout_metrics", "record_path", "record_step", "run_record"]

PREFIX = "rollout/tau/"


@dataclass(slots=True)
class RunRecord:
    """The process's record of one run folder; ``lock`` guards ``record`` (hooks and draws share it)."""

    path: Path
    record: TaskRecord
    lock: threading.Lock = field(default_factory=threading.Lock)
    draws: CurriculumDraws | None = None
    """Set by the curriculum's data source when it runs in this process."""


class _Records:
    """One :class:`RunRecord` per record file in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_path: dict[Path, RunRecord] = {}


def forget_records() -> None:
    """Drop this process's records (a new run in the same process, or a test of a restart): the next use reads
    the file again, as a restarted process does."""
    records = shared_state().part(_Records)
    with records.lock:
        records.by_path.clear()


def record_path(args: Any) -> Path | None:
    """The record file ``args`` name (``tau_task_record_dir``, else ``--save``); None when neither is set.

    Raises:
        ConfigError: ``tau_task_record_dir`` is empty or names a file, naming the key.
    """
    folder = config_from_args(args).task_record_dir
    if folder is not None:
        if not folder.strip() or Path(folder).is_file():
            what = "is empty" if not folder.strip() else "is a file"
            raise ConfigError(f"tau_task_record_dir={folder!r} {what}; expected a folder for {RECORD_FILE}")
        return Path(folder) / RECORD_FILE
    save = getattr(args, "save", None)
    return Path(save) / RECORD_FILE if save else None


def run_record(args: Any) -> RunRecord | None:
    """This process's record for ``args``' run folder, read back on first use; None without a run folder.

    Raises:
        ConfigError: as :func:`record_path`.
    """
    path = record_path(args)
    if path is None:
        if shared_state().first_time("tau task record", None):
            logger.warning("tau task record: no run folder (set tau_task_record_dir or slime's --save); none kept")
        return None
    records = shared_state().part(_Records)
    with records.lock:
        found = records.by_path.get(path)
        if found is None:
            source = path
            load = getattr(args, "load", None)
            if not path.exists() and load and (Path(load) / RECORD_FILE).exists():
                source = Path(load) / RECORD_FILE
            record = TaskRecord.load(source)
            logger.info(
                "tau task record %s: %d tasks, last step %d (read from %s)",
                path,
                len(record.tasks),
                record.last_step,
                source,
            )
            found = records.by_path[path] = RunRecord(path, record)
        return found


def record_step(args: Any, groups: Sequence[Sequence[Any]], rollout_id: int, default_domain: str) -> dict[str, float]:
    """Count one step's groups (once per rollout id), save the record and return ``rollout/tau/record/*`` and,
    with the curriculum on, ``rollout/tau/curriculum/*`` (the share drawn down and each task drawn less)."""
    run = run_record(args)
    if run is None:
        return {}
    outcomes = task_outcomes((s for group in groups for s in group), default_domain)
    with run.lock:
        counted = run.record.add_step(rollout_id, outcomes)
        step = run.draws.take(run.record.tasks) if run.draws is not None else None
        if step is not None:
            run.record.down_weighted = (rollout_id, list(step.down_weighted))
        try:
            run.record.save(run.path)
        except OSError as exc:
            logger.warning("tau task record: cannot write %s (%s); the run goes on", run.path, exc)
        metrics = {
            f"{PREFIX}record/tasks": float(len(run.record.tasks)),
            f"{PREFIX}record/counted": float(counted),
        }
    if step is not None:
        metrics |= {
            f"{PREFIX}curriculum/drawn_down_share": step.drawn_down_share,
            f"{PREFIX}curriculum/looked_at": float(step.looked_at),
            f"{PREFIX}curriculum/skipped": float(step.skipped),
            f"{PREFIX}curriculum/down_weighted_tasks": float(len(step.down_weighted)),
        }
        floor = run.draws.settings.floor if run.draws is not None else 1.0
        metrics |= {f"{PREFIX}curriculum/weight/{task}": floor for task in step.down_weighted}
        logger.info(
            "tau curriculum step %d: %d of %d groups drawn down; tasks drawn less: %s",
            rollout_id,
            step.skipped,
            step.looked_at,
            ", ".join(step.down_weighted) or "none",
        )
    return metrics


def heldout_metrics(args: Any, rollout_id: int, eval_metrics: dict[str, float], eval_prefix: str) -> dict[str, float]:
    """Beside each eval ``<dataset>/<benchmark>/<domain>/pass^1``: ``train_pass_rate`` (the record's, over the last
    ``tau_train_window_steps`` steps up to ``rollout_id``), ``train_episodes`` and ``train_minus_eval`` (a gap that
    grows is overfitting). Nothing for a domain not trained on in that window, or without a record."""
    run = run_record(args)
    if run is None:
        return {}
    window = config_from_args(args).train_window_steps
    out: dict[str, float] = {}
    with run.lock:
        for key, eval_rate in eval_metrics.items():
            if not key.startswith(eval_prefix) or not key.endswith("/pass^1"):
                continue
            where = key[: -len("/pass^1")]
            domain = "/".join(where[len(eval_prefix) :].split("/")[-2:])
            train = run.record.train_pass_rate(domain, rollout_id, window)
            if train is None:
                continue
            rate, episodes = train
            out |= {
                f"{where}/train_pass_rate": rate,
                f"{where}/train_episodes": float(episodes),
                f"{where}/train_minus_eval": rate - eval_rate,
            }
    return out
