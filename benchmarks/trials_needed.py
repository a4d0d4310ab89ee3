"""How many trials per task a claimed pass^1 gain needs: the power of ``noise.paired_test`` on simulated runs.

Each simulated pair of runs scores the same T tasks: task i passes with probability p_i (drawn uniformly from
[0, 0.95]) in run A and p_i + GAIN in run B, n trials per task in each run. A pair counts as *found* when
``paired_test(...).exceeds_noise`` (p < 0.05 and the 95% interval excludes 0), what ``show --compare`` prints
as "LARGER than the noise". GAIN 0 gives the false-alarm rate between two runs of one model.

    python benchmarks/trials_needed.py [--tasks 50] [--gain 0.05] [--trials 1,4,8,16,20,32] [--pairs 400]
"""

from __future__ import annotations

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slime_tau_plugin.reporting.noise import paired_test  # noqa: E402


def found_share(tasks: int, trials: int, gain: float, pairs: int, seed: int = 0) -> float:
    """Share of ``pairs`` simulated run pairs in which the paired test finds B's gain."""
    rng = random.Random(seed)
    found = 0
    for pair in range(pairs):
        rates = [rng.uniform(0, 0.95) for _ in range(tasks)]
        a = [sum(rng.random() < p for _ in range(trials)) / trials for p in rates]
        b = [sum(rng.random() < p + gain for _ in range(trials)) / trials for p in rates]
        found += paired_test(a, b, seed=pair).exceeds_noise
    return found / pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50, help="tasks both runs score (τ² airline: 50)")
    ap.add_argument("--gain", type=float, default=0.05, help="B's true pass^1 gain on every task")
    ap.add_argument("--trials", default="1,4,8,16,20,32", help="trials per task to try, comma-separated")
    ap.add_argument("--pairs", type=int, default=400, help="simulated run pairs per setting")
    args = ap.parse_args()
    print(f"{args.tasks} tasks, B {args.gain:+.2f} on every task, {args.pairs} simulated pairs per row")
    print("trials/task  found (gain)  false alarms (same model)")
    for trials in (int(t) for t in args.trials.split(",")):
        gain = found_share(args.tasks, trials, args.gain, args.pairs)
        same = found_share(args.tasks, trials, 0.0, args.pairs, seed=1)
        print(f"{trials:11d}  {gain:12.0%}  {same:25.0%}")


if __name__ == "__main__":
    main()
