"""``slime-tau``: prepare task data, serve a CPU policy, run rollouts/evals, show trajectories.

``slime-tau rollout`` with no ``--sglang-url`` starts the built-in oracle policy server on 127.0.0.1
and runs the whole pipeline on the CPU: that is the README's main job. Each subcommand lives in its own
module (``prepare``, ``serve``, ``rollout``, ``show``) with ``add_parser(sub)`` and ``run(ns)``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from ..errors import ConfigError
from . import prepare, rollout, serve, show

logger = logging.getLogger("slime_tau_plugin")

COMMANDS = {"prepare": prepare, "serve": serve, "rollout": rollout, "show": show}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slime-tau", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if ns.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return COMMANDS[ns.command].run(ns)
    except ConfigError as exc:
        print(f"slime-tau {ns.command}: error: {exc}", file=sys.stderr)
        return 2
