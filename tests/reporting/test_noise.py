"""``noise.py``: pass^k's bootstrap interval covers the truth, and the paired test tells noise from a gain.

The synthetic runs have known per-task success rates (drawn uniformly, so the true pass^k of the task
population is E[p^k] = 1 / (k + 1)); trials are Bernoulli draws. Everything is seeded.
"""

from __future__ import annotations

import random

import pytest

from slime_tau_plugin.reporting.noise import (
    Interval,
    bootstrap_interval,
    paired_test,
    pass_k_intervals,
    per_task_pass_k,
)
from slime_tau_plugin.reporting.summary import pass_hat_k


def synthetic_run(rates: list[float], trials: int, rng: random.Random) -> list[int]:
    return [sum(rng.random() < p for _ in range(trials)) for p in rates]


def test_pass_k_interval_contains_the_truth_at_about_its_level():
    rng = random.Random(7)
    covered = {1: 0, 2: 0}
    runs = 40
    for run in range(runs):
        rates = [rng.random() for _ in range(100)]
        wins = synthetic_run(rates, 4, rng)
        intervals = pass_k_intervals(wins, [4] * len(wins), seed=run)
        for k in covered:
            covered[k] += (1 / (k + 1)) in intervals[f"pass^{k}"]
            estimate = pass_hat_k(wins, 4, k)
            assert estimate in intervals[f"pass^{k}"], "the estimate lies inside its own interval"
    assert covered[1] >= 34 and covered[2] >= 34, covered  # 95% intervals: ~38 of 40 expected


def test_interval_is_seeded_and_narrows_with_more_tasks():
    values = [1.0, 0.0, 0.5, 1.0, 0.25, 0.75] * 5
    assert bootstrap_interval(values, seed=3) == bootstrap_interval(values, seed=3)
    wide = bootstrap_interval(values[:6], seed=0)
    narrow = bootstrap_interval(values * 10, seed=0)
    assert narrow.high - narrow.low < (wide.high - wide.low) / 2
    assert bootstrap_interval([1.0] * 5) == Interval(1.0, 1.0)
    with pytest.raises(ValueError):
        bootstrap_interval([])


def test_per_task_pass_k_is_taus_unbiased_estimate():
    assert per_task_pass_k([3, 1, 0], [3, 3, 3], 2) == [1.0, 0.0, 0.0]
    assert per_task_pass_k([2], [4], 2) == [pytest.approx(1 / 6)]


def test_paired_test_tells_a_real_gain_from_run_to_run_noise():
    rng = random.Random(11)
    rates = [rng.random() for _ in range(80)]
    same_a = per_task_pass_k(synthetic_run(rates, 4, rng), [4] * 80, 1)
    same_b = per_task_pass_k(synthetic_run(rates, 4, rng), [4] * 80, 1)
    noise = paired_test(same_a, same_b)
    assert not noise.exceeds_noise and noise.tasks == 80 and 0.0 in noise.interval
    better = per_task_pass_k(synthetic_run([min(1.0, p + 0.25) for p in rates], 4, rng), [4] * 80, 1)
    gain = paired_test(same_a, better)
    assert gain.exceeds_noise and gain.p_value < 0.01 and gain.interval.low > 0.1
    assert paired_test(same_a, same_a).p_value == 1.0
    with pytest.raises(ValueError):
        paired_test([1.0], [1.0, 0.0])
