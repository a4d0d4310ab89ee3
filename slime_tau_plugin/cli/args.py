"""Argument helpers shared by the ``slime-tau`` subcommands."""

from __future__ import annotations

import argparse

from ..config import BENCHMARK_DOMAINS


def add_task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", default="tau2", choices=sorted(BENCHMARK_DOMAINS))
    p.add_argument("--domain", default="retail", help="airline, retail or telecom (τ² only)")
    p.add_argument("--split", default="train")
