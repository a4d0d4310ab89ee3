"""``slime-tau prepare``: write slime JSONL task rows (and eval sets with a slime ``--eval-config``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import TauConfig
from ..errors import ConfigError
from .args import add_task_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="write slime JSONL task rows (--input-key index --metadata-key metadata)")
    add_task_args(p)
    p.add_argument("--out", required=True, help="FILE.jsonl for --prompt-data")
    p.add_argument(
        "--eval",
        action="append",
        default=[],
        metavar="BENCHMARK/DOMAIN/SPLIT",
        help="also write this task set for evaluation (repeatable), e.g. tau2/retail/test",
    )
    p.add_argument("--allow-leakage", action="store_true", help="write eval sets that overlap the training tasks")


def run(ns: argparse.Namespace) -> int:
    from ..data import eval_config_yaml, leakage, parse_task_set, write_task_rows

    train = (ns.benchmark, ns.domain, ns.split)
    TauConfig(benchmark=ns.benchmark, domain=ns.domain, split=ns.split)
    evals = [parse_task_set(spec) for spec in ns.eval]
    problems = [why for e in evals if (why := leakage(train, e))]
    if problems and not ns.allow_leakage:
        raise ConfigError(
            "refusing to write overlapping training and evaluation tasks:\n  - "
            + "\n  - ".join(problems)
            + "\nchoose other sets (e.g. train on tau1/retail/train), or pass --allow-leakage to write them anyway"
        )
    out = Path(ns.out)
    write_task_rows(train, out)
    written = [write_task_rows(e, out.with_name(f"{'_'.join(e)}.jsonl")) for e in evals] or [out]
    eval_yaml = out.with_suffix(".eval.yaml")
    eval_yaml.write_text(eval_config_yaml(written), encoding="utf-8")
    for why in problems:
        print(f"warning: {why} (written because of --allow-leakage)", file=sys.stderr)
    print(f"slime eval config: {eval_yaml} (--eval-config)")
    return 0
