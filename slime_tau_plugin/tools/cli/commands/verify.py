"""``slime-tau verify RUN_DIR --model DIR``: teacher-force every stored sample and compare log-probs.

The rollout-vs-trainer check per sample and per turn: max and mean |rollout - teacher-forced| log-prob over
trainable tokens, the first turn over ``--tolerance``, trainable tokens without a log-prob, and mask errors
(``model/checks.py``), and, as a note, where the decoded ids depart from the chat template's rendering of the
recorded messages (``model/drift.py``). Exit 0 when every sample passes, 1 otherwise, 2 on bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from slime_tau_plugin.tools.cli.args import non_negative_float, positive_float, positive_int

if TYPE_CHECKING:
    from slime_tau_plugin.tools.model.checks import SampleCheck


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="teacher-force a run's samples through a model and compare log-probs")
    d = "(default: %(default)s)"
    p.add_argument("run_dir", help="the --out directory of a 'slime-tau rollout' run (samples.jsonl, summary.json)")
    p.add_argument("--model", required=True, help="the model the rollout sampled from (transformers directory)")
    p.add_argument("--tolerance", type=non_negative_float, default=1e-4, help=f"max |delta log-prob| per token {d}")
    p.add_argument(
        "--temperature",
        type=positive_float,
        default=None,
        help="override the run's temperature (default: summary.json)",
    )
    p.add_argument(
        "--block-tokens",
        type=positive_int,
        default=None,
        help="tokens per forward block: memory grows with the sample times this, not its square (default: 2048)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (default: a table)")


def run(ns: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from slime_tau_plugin.tools.cli.play.verify_run import verify_run

    report = verify_run(
        ns.run_dir, ns.model, tolerance=ns.tolerance, temperature=ns.temperature, block_tokens=ns.block_tokens
    )
    for warning in report.skipped:
        print(f"warning: {warning}", file=sys.stderr)
    totals = report.totals()
    if ns.json:
        payload = {
            "run_dir": report.run_dir,
            "model": report.model_dir,
            "temperature": report.temperature,
            "tolerance": report.tolerance,
            "ok": report.is_ok,
            "total": totals,
            "samples": [{**asdict(s), "ok": s.is_ok()} for s in report.samples],
        }
        print(json.dumps(payload, indent=1))
        return 0 if report.is_ok else 1
    print(
        f"verify {report.run_dir} with {report.model_dir} "
        f"(temperature {report.temperature:g}, tolerance {ns.tolerance:g})"
    )
    print(
        f"{'sample':>6} {'task':>6} {'trial':>5} {'turns':>5} {'trainable':>9} {'max|Δ|':>9} {'mean|Δ|':>9} "
        f"{'first>tol':>9} {'no-lp':>5}  verdict"
    )
    for s in report.samples:
        verdict = "ok" if s.is_ok() else "; ".join(_problems(s, ns.tolerance))
        if s.text_drift is not None:
            where = "the prompt" if s.text_drift < 0 else f"response position {s.text_drift}"
            verdict += f" (text departs from the chat template's rendering at {where})"
        first = "-" if s.first_turn_over is None else str(s.first_turn_over)
        trial = "-" if s.trial is None else str(s.trial)
        print(
            f"{s.index:>6} {s.task:>6} {trial:>5} {s.turns:>5} {s.trainable:>9} {s.max_abs:>9.2e} "
            f"{s.mean_abs:>9.2e} {first:>9} {s.missing_log_probs:>5}  {verdict}"
        )
    print(
        f"total: {totals['within_tolerance']}/{totals['samples']} samples ok | "
        f"turns/episode {totals['turns_mean']:.1f} | "
        f"trainable tokens {totals['trainable_tokens']} | max|Δ| {totals['max_abs']:.2e} | "
        f"mean|Δ| {totals['mean_abs']:.2e} | no log-prob {totals['missing_log_probs']} | "
        f"mask errors {totals['mask_errors']}"
    )
    return 0 if report.is_ok else 1


def _problems(s: SampleCheck, tolerance: float) -> list[str]:
    """Why a sample failed, shortest first (the table's last column)."""
    problems = []
    if s.first_turn_over is not None:
        problems.append(f"|Δ| {s.max_abs:.3g} > {tolerance:g} from turn {s.first_turn_over}")
    if s.missing_log_probs:
        problems.append(f"{s.missing_log_probs} trainable tokens without a log-prob")
    problems.extend(s.mask_errors[:2])
    if len(s.mask_errors) > 2:
        problems.append(f"{len(s.mask_errors) - 2} more mask errors (--json lists all)")
    return problems
