"""``prepare --keep-pass-rate RUN_DIR:LOW-HIGH``: keep the training tasks a baseline run solved at a useful rate.

A GRPO group whose episodes all pass, or all fail, has zero advantage: its rollouts teach nothing. A baseline
``slime-tau rollout`` (several ``--samples-per-task``) says which tasks are always or never solved; this filter
keeps the tasks whose pass rate (τ's reward 1, over the run's episodes of that task that counted: FAILED
episodes and those cut off by the deadline or the user's token budget are no evidence) lies in
``[LOW, HIGH]``. A training set the run never played is refused; tasks of a played set that the run lacks are
dropped and said so in one line. Imports the engine and ``run_files`` only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from slime_tau_plugin.engine.data import TaskSet
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.play.runner import episode_key
from slime_tau_plugin.tools.cli.run_dir.run_files import read_samples

FLAG = "--keep-pass-rate"
SUCCESS = 1.0 - 1e-6
"""τ's pass: reward 1 (``adapters/slime/metrics.SUCCESS_THRESHOLD``)."""
_NO_EVIDENCE = {r.value for r in TerminationReason if r.is_removed}

TaskKey = tuple[str, str, str, str]
"""(benchmark, domain, split, task id)."""


@dataclass(frozen=True, slots=True)
class PassRateFilter:
    """The baseline run's pass rate per task and the range a task's rate must lie in (inclusive)."""

    run: Path
    low: float
    high: float
    rates: dict[TaskKey, float]

    @classmethod
    def parse(cls, spec: str) -> PassRateFilter:
        """``RUN_DIR:LOW-HIGH`` (e.g. ``runs/base:0.1-0.9``), the run read and its pass rates computed.

        Raises:
            ConfigError: a malformed spec, a range outside 0..1 or reversed, or a run directory without samples.
        """
        where, _, span = spec.rpartition(":")
        low_text, _, high_text = span.partition("-")
        try:
            low, high = float(low_text), float(high_text)
        except ValueError:
            low = high = -1.0
        if not where or not 0.0 <= low <= high <= 1.0:
            raise ConfigError(
                f"{FLAG} {spec!r} is invalid; expected RUN_DIR:LOW-HIGH with 0 <= LOW <= HIGH <= 1, "
                "e.g. runs/baseline:0.1-0.9"
            )
        return cls(Path(where), low, high, _pass_rates(Path(where)))

    def keep(self, task_set: TaskSet, refs: list[TaskRef]) -> tuple[list[TaskRef], str]:
        """The tasks of ``task_set`` to keep, and the line that says what was kept and dropped.

        Raises:
            ConfigError: the run played no task of ``task_set`` (another domain, split or benchmark), or no task
                is left (an empty training file trains nothing).
        """
        key = (task_set.benchmark, task_set.domain, task_set.split)
        if not any(k[:3] == key for k in self.rates):
            played = ", ".join(sorted({"/".join(k[:3]) for k in self.rates}))
            raise ConfigError(
                f"{FLAG}: {self.run} has no episode of {task_set} (it played {played}); pass a baseline run of "
                f"that set ('slime-tau rollout --domain {task_set.domain} --split {task_set.split}')"
            )
        kept = [r for r in refs if self.low <= self.rates.get((*key, str(r.task_id)), -1.0) <= self.high]
        absent = sum((*key, str(r.task_id)) not in self.rates for r in refs)
        too_easy = sum(self.rates.get((*key, str(r.task_id)), -1.0) > self.high for r in refs)
        too_hard = len(refs) - len(kept) - absent - too_easy
        line = (
            f"{task_set}: kept {len(kept)} of {len(refs)} tasks with a pass rate in [{self.low:g}, {self.high:g}] "
            f"in {self.run}; dropped {too_easy} above, {too_hard} below"
        )
        if absent:
            line += f", {absent} not in the run (a baseline run must play every task to rate it)"
        if not kept:
            raise ConfigError(
                f"{FLAG}: no task of {task_set} is left ({line.split(': ', 1)[1]}); widen the range or rate the "
                f"tasks with a baseline run of the whole set ('slime-tau rollout --domain {task_set.domain} "
                f"--split {task_set.split} --samples-per-task 4')"
            )
        return kept, line


def _pass_rates(run: Path) -> dict[TaskKey, float]:
    """Each task's share of counted episodes with τ's reward 1 (``task_reward`` when the reward was shaped)."""
    samples = read_samples(run)
    wins: Counter[TaskKey] = Counter()
    trials: Counter[TaskKey] = Counter()
    for i in range(len(samples)):
        row = samples.row(i)
        if row is None:
            continue
        meta = row.get("metadata") or {}
        if str(row.get("status")) == "failed" or meta.get("termination_reason") in _NO_EVIDENCE:
            continue
        key = episode_key(meta)[:4]
        reward = meta.get("task_reward", row.get("reward"))
        trials[key] += 1
        wins[key] += isinstance(reward, (int, float)) and reward >= SUCCESS
    return {key: wins[key] / n for key, n in trials.items()}
