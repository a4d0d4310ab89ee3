"""Environment CPU ms per episode for both τ backends, naive use of the τ package vs ours, in one table.

Runs ``env_cost_tau2.measure`` (τ², always installed with the ``tau2`` extra) and ``env_cost_tau1.measure``
(τ-bench v1, only where it is installed: it is not on PyPI). See those files for what an episode is.

    python benchmarks/env_cost.py [--episodes 20] [--backend all|tau2|tau1]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import env_cost_tau2  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="tasks per set")
    parser.add_argument("--backend", default="all", choices=["all", "tau2", "tau1"])
    ns = parser.parse_args()
    sets = []
    if ns.backend in ("all", "tau2"):
        sets += [("τ²", env_cost_tau2.measure, domain, split) for domain, split in env_cost_tau2.SETS]
    if ns.backend in ("all", "tau1"):
        if importlib.util.find_spec("tau_bench") is None:
            print("(τ-bench v1 is not installed: its rows are skipped)")
        else:
            import env_cost_tau1

            sets += [("τ-bench v1", env_cost_tau1.measure, d, s) for d, s in (("retail", "test"), ("airline", "test"))]
    print("| backend | set | episodes | naive ms | ours ms, first visit | ours ms, repeat | naive / ours |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, measure, domain, split in sets:
        r = measure(domain, split, ns.episodes)
        print(
            f"| {name} | {domain}/{split} | {r['episodes']} | {r['naive_ms']:.1f} | {r['ours_first_ms']:.2f} | "
            f"{r['ours_ms']:.2f} | {r['ratio_first']:.0f}x (first), {r['ratio']:.0f}x (repeat) |"
        )


if __name__ == "__main__":
    main()
