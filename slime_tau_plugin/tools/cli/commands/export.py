"""``slime-tau export RUN_DIR... --out DIR``: finished rollouts as a τ² leaderboard submission.

One finished ``slime-tau rollout`` folder per domain in, what ``tau2 submit prepare`` writes out
(``submission.json`` and ``trajectories/``), checked by upstream τ²'s own leaderboard checks first. Runs the
leaderboard would not take are refused before τ is imported (``export_run``), one line each with exit 2: not
finished, not τ², a domain it does not rank, another split than ``base`` or tasks missing, FAILED samples, unequal or
fewer than 4 trials, the scripted user instead of an LLM user simulator, two runs of one domain, or runs whose agent
or user simulator differ. The writing needs upstream τ² installed (``export_tau``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.args import positive_int
from slime_tau_plugin.tools.cli.run_dir.export_run import (
    LEADERBOARD_USER_SIMULATOR,
    MIN_TRIALS,
    check_together,
    read_run,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write finished runs in τ²'s leaderboard submission format")
    d = "(default: %(default)s)"
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a finished rollout's --out folder, one per domain")
    p.add_argument("--out", required=True, help="the submission folder to write (must not exist or be empty)")
    p.add_argument("--model-name", default=None, help="the model's name (default: the runs' --policy-model)")
    p.add_argument("--model-organization", required=True, help="who developed the model")
    p.add_argument("--submitting-organization", default=None, help="who ran the evaluation (default: the above)")
    p.add_argument("--email", default=None, help="contact email for the leaderboard's maintainers")
    p.add_argument(
        "--submission-type",
        choices=("custom", "standard"),
        default="custom",
        help="custom: a model trained on τ-bench tasks or rewards, by the leaderboard's rules; standard needs its "
        f"default user simulator ({LEADERBOARD_USER_SIMULATOR}) {d}",
    )
    p.add_argument(
        "--min-trials",
        type=positive_int,
        default=MIN_TRIALS,
        help=f"fewest trials per task accepted; the leaderboard asks {MIN_TRIALS} or more {d}",
    )


def run(ns: argparse.Namespace) -> int:
    out = Path(ns.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty folder; pass a new one")
    runs = [read_run(path, min_trials=ns.min_trials) for path in ns.run_dirs]
    check_together(runs)
    user_model = str(runs[0].user.get("model"))
    if ns.submission_type == "standard" and not user_model.startswith(LEADERBOARD_USER_SIMULATOR):
        raise ConfigError(
            f"--submission-type standard: the user simulator is {user_model}, not the leaderboard's default "
            f"{LEADERBOARD_USER_SIMULATOR}; play it with --user-model {LEADERBOARD_USER_SIMULATOR} or export as custom"
        )
    from slime_tau_plugin.tools.cli.views.export_tau import SubmissionInfo, export

    info = SubmissionInfo(
        ns.model_name, ns.model_organization, ns.submitting_organization, ns.email, ns.submission_type
    )
    written = export(runs, info, out)
    scores = {domain: r.get("pass_1") for domain, r in written["results"].items()}
    print(f"wrote {out / 'submission.json'} and {len(runs)} trajectory file(s); pass^1 (%): {json.dumps(scores)}")
    print(f"check it with upstream τ²: tau2 submit validate {out}", file=sys.stderr)
    return 0
