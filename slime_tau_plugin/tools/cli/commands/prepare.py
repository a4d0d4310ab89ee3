"""``slime-tau prepare``: parse the flags, call ``task_files.prepare_files``, say what was written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.args import positive_int
from slime_tau_plugin.tools.task_files import RowFormat

DESCRIPTION = """\
Write τ tasks as JSONL rows for slime: one training file (one task set, or several mixed into one file)
and, with --eval, one file per eval set plus a slime --eval-config YAML (for --out data/train.jsonl:
data/train.eval.yaml; written only with --eval).

Each row is {"index": i, "metadata": {"benchmark", "domain", "split", "task_id" (tau2) or "task_index"
(tau1), "task": τ's task dump}}; index is unique within a file, and the metadata names the task, so sets
from several domains and benchmarks mix freely (shuffle them with slime's --rollout-shuffle). In slime:

  --prompt-data data/train.jsonl --input-key index --metadata-key metadata
  --custom-generate-function-path slime_tau_plugin.adapters.slime.generate.generate
  --eval-config data/train.eval.yaml   (each dataset names our generate function itself)

Eval files go next to the training file, as BENCHMARK_DOMAIN_SPLIT.jsonl. Training and eval sets that share
tasks are refused (τ² retail/airline tasks are revised τ-bench v1 test tasks; τ²'s base split holds train
and test) unless --allow-leakage; training sets that repeat tasks are refused. Existing files are
refused unless --force.

examples:
  slime-tau prepare --out data/retail_train.jsonl             (tau2/retail/train)
  slime-tau prepare --domain retail,airline --split train --out data/train.jsonl
  slime-tau prepare --train tau2/retail/train --train tau2/airline/train --out data/train.jsonl \\
      --eval tau2/retail,airline/test --eval-samples 4
  slime-tau prepare --out data/train.jsonl --keep-pass-rate runs/baseline:0.1-0.9
      (only tasks the baseline run solved in 10%..90% of its episodes)
"""
SHORTHAND_DEFAULTS = {"benchmark": "tau2", "domain": "retail", "split": "train"}
SET = "BENCHMARK/DOMAIN/SPLIT"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="write slime JSONL task rows (training mixtures, eval sets + slime --eval-config YAML)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sets = p.add_argument_group("training sets (--train, or the --benchmark/--domain/--split shorthand)")
    sets.add_argument(
        "--train",
        action="append",
        default=[],
        metavar=SET,
        help="a training set (repeatable; DOMAIN may be a comma list), e.g. tau2/retail,airline/train "
        "(default: the shorthand's tau2/retail/train)",
    )
    sets.add_argument("--benchmark", default=None, help="one set: tau2 (default) or tau1")
    sets.add_argument(
        "--domain", default=None, help="one set: retail (default), airline, telecom (tau2), or a comma list"
    )
    sets.add_argument(
        "--split", default=None, help="one set: train (default; a domain without one: its only split), test, base, ..."
    )
    p.add_argument(
        "--out", required=True, metavar="FILE.jsonl", help="the training file (slime --prompt-data; required)"
    )
    p.add_argument(
        "--eval",
        action="append",
        default=[],
        metavar=SET,
        help="an eval set (repeatable; DOMAIN may be a comma list): its own file + a dataset in the eval YAML "
        "(default: none)",
    )
    p.add_argument(
        "--eval-samples",
        type=positive_int,
        default=None,
        metavar="K",
        help="episodes per eval task (slime's n_samples_per_eval_prompt; pass^k needs K >= k); default 1",
    )
    p.add_argument(
        "--allow-leakage",
        action="store_true",
        help="write eval sets that overlap the training tasks (default: off, refused)",
    )
    p.add_argument(
        "--keep-pass-rate",
        default=None,
        metavar="RUN_DIR:LOW-HIGH",
        help="keep only the training tasks whose pass rate in a baseline 'slime-tau rollout' run (its --out "
        "directory) lies in [LOW, HIGH], e.g. runs/base:0.1-0.9: no always- or never-solved groups "
        "(default: keep every task)",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite output files that already exist (default: off, refused)"
    )
    p.add_argument(
        "--format",
        default="slime",
        choices=[f.value for f in RowFormat],
        help="slime: JSONL rows + eval YAML; verl: parquet rows for data.train_files, and with --eval one "
        "OUT.val.parquet for data.val_files (default: slime)",
    )


def run(ns: argparse.Namespace) -> int:
    from slime_tau_plugin.engine.data import parse_task_sets
    from slime_tau_plugin.tools.cli.play.pass_filter import PassRateFilter
    from slime_tau_plugin.tools.task_files import PrepareRequest, prepare_files

    shorthand = {name: getattr(ns, name) for name in SHORTHAND_DEFAULTS}
    if ns.train and any(v is not None for v in shorthand.values()):
        given = ", ".join(f"--{k} {v}" for k, v in shorthand.items() if v is not None)
        raise ConfigError(f"{given} cannot be combined with --train; name every training set with --train {SET}")
    if ns.eval_samples is not None and not ns.eval:
        raise ConfigError("--eval-samples sets the episodes per eval task; add --eval SET or drop it")
    values = {name: value or SHORTHAND_DEFAULTS[name] for name, value in shorthand.items()}
    if not ns.train and ns.split is None and ns.domain and "," not in ns.domain:  # mock: its one split, base
        from slime_tau_plugin.tools.cli.play.task_select import default_split

        values["split"] = default_split(values["benchmark"], ns.domain)
    train_specs = ns.train or [f"{values['benchmark']}/{values['domain']}/{values['split']}"]
    if ns.out.endswith(("/", "\\")):
        raise ConfigError(f"--out {ns.out} names a directory; expected a file path, e.g. {ns.out}train.jsonl")
    keep = None if ns.keep_pass_rate is None else PassRateFilter.parse(ns.keep_pass_rate).keep
    request = PrepareRequest(
        train=tuple(s for spec in train_specs for s in parse_task_sets(spec)),
        evals=tuple(s for spec in ns.eval for s in parse_task_sets(spec)),
        out=Path(ns.out),
        eval_samples=1 if ns.eval_samples is None else ns.eval_samples,
        allow_leakage=ns.allow_leakage,
        force=ns.force,
        format=RowFormat(ns.format),
        keep=keep,
    )
    written = prepare_files(request)
    for why in written.warnings:
        print(f"warning: {why} (written because of --allow-leakage)", file=sys.stderr)
    for line in written.notes:
        print(line)
    for f in (written.train, *written.evals):
        print(f"wrote {f.rows} tasks ({', '.join(map(str, f.sets))}) to {f.path}")
    if request.format is RowFormat.VERL:
        val = ",".join(str(f.path.resolve()) for f in written.evals)
        print(
            f"verl overrides: data.train_files={written.train.path.resolve()}"
            + (f" data.val_files={val}" if val else "")
        )
        return 0
    flags = f"--prompt-data {written.train.path.resolve()} --input-key index --metadata-key metadata"
    if written.eval_config is not None:
        print(f"slime eval config: {written.eval_config} (--eval-config)")
        flags += f" --eval-config {written.eval_config.resolve()}"
    print(f"slime flags: {flags}")
    return 0
