"""How much of a pass^k is noise: a bootstrap interval over tasks and a paired test between two runs.

A τ run scores a few dozen to a few hundred tasks a few times each, so two runs of one model differ by
several points by chance (tau-bench #57, tau2-bench #540). Tasks are the unit: every interval resamples
tasks (with their trials), and two runs are compared on the tasks both scored, task by task, so the
tasks' own difficulty cancels. Everything is seeded: the same data gives the same interval. Pure Python,
imports nothing from the package.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 1000
"""Bootstrap resamples per interval (the percentile interval's ends move by ~0.002 between seeds)."""
FLIPS = 10000
"""Sign flips in the paired permutation test."""
LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    """A percentile bootstrap interval of a mean over tasks."""

    low: float
    high: float
    level: float = LEVEL

    def __contains__(self, value: float) -> bool:
        return self.low - 1e-12 <= value <= self.high + 1e-12


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """Run B minus run A over the tasks both scored."""

    tasks: int
    """Tasks both runs scored (the only ones compared)."""
    difference: float
    """Mean over those tasks of B's per-task value minus A's."""
    interval: Interval
    """Bootstrap interval of ``difference`` (tasks resampled in pairs)."""
    p_value: float
    """Sign-flip permutation test of "no difference" (two-sided)."""

    @property
    def exceeds_noise(self) -> bool:
        """The difference is larger than the noise at the 5% level (and its interval excludes 0)."""
        return self.p_value < 1 - LEVEL and 0.0 not in self.interval


def per_task_pass_k(successes: Sequence[int], trials: Sequence[int], k: int) -> list[float]:
    """Each task's unbiased pass^k, C(c, k) / C(n, k): τ's pass^k is their mean."""
    return [math.comb(c, k) / math.comb(n, k) for c, n in zip(successes, trials, strict=True)]


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> Interval:
    """The percentile bootstrap interval of ``mean(values)``, resampling the tasks with replacement.

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("a bootstrap interval needs at least one task")
    rng, n = random.Random(seed), len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return Interval(means[int(tail * resamples)], means[min(resamples - 1, int((1 - tail) * resamples))], level)


def pass_k_intervals(
    successes: Sequence[int], trials: Sequence[int], *, resamples: int = RESAMPLES, seed: int = 0
) -> dict[str, Interval]:
    """``pass^k`` -> its 95% interval over tasks, for k = 1 .. the fewest trials any task has."""
    return {
        f"pass^{k}": bootstrap_interval(per_task_pass_k(successes, trials, k), resamples=resamples, seed=seed)
        for k in range(1, min(trials) + 1)
    }


def paired_test(
    a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, flips: int = FLIPS, seed: int = 0
) -> PairedDifference:
    """Compare two runs task by task (``a[i]`` and ``b[i]`` are the same task's values).

    Raises:
        ValueError: the runs do not have the same tasks, or none.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"a paired test needs the same tasks in both runs; got {len(a)} and {len(b)}")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    observed = sum(diffs) / n
    rng = random.Random(seed)
    extreme = sum(
        abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) / n >= abs(observed) - 1e-12 for _ in range(flips)
    )
    interval = bootstrap_interval(diffs, resamples=resamples, seed=seed)
    return PairedDifference(n, observed, interval, (1 + extreme) / (1 + flips))
