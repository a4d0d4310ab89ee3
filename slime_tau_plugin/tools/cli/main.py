"""slime-tau: prepare task data, serve a CPU policy, run rollouts/evals, show trajectories.

``slime-tau rollout`` with no ``--sglang-url`` starts the built-in oracle policy server on 127.0.0.1
and runs the whole pipeline on the CPU: that is the README's main job. Each subcommand lives in its own
module (``prepare``, ``serve``, ``serve-user``, ``rollout``, ``show``, ``soak``...) with ``add_parser(sub)``
and ``run(ns)``.

Exit codes: 0 done; 1 a rollout whose samples all FAILED; 2 a usage or configuration error (one line on
stderr); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from slime_tau_plugin import __version__
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.loop import boundary
from slime_tau_plugin.tools.cli.args import HelpFormatter, Parser
from slime_tau_plugin.tools.cli.commands import (
    export,
    make_tiny_model,
    prepare,
    rollout,
    serve,
    serve_gym,
    serve_user,
    show,
    soak,
    verify,
)
from slime_tau_plugin.tools.cli.flag_names import in_cli_terms
from slime_tau_plugin.tools.cli.play.stop_signals import EXIT_INTERRUPTED

logger = logging.getLogger("slime_tau_plugin")

COMMANDS = {
    "prepare": prepare,
    "serve": serve,
    "rollout": rollout,
    "show": show,
    "make-tiny-model": make_tiny_model,
    "verify": verify,
    "export": export,
    "serve-user": serve_user,
    "serve-gym": serve_gym,
    "soak": soak,
}
FAILURE_BOUNDARY_LOGGER = boundary.logger.name
"""The failure boundary's logger, taken from the boundary itself (a name written here went stale when the boundary
moved out of the slime adapter): its ``logger.exception`` is one traceback per failed sample; the CLI's summary
names the error instead."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="slime-tau", description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v: INFO logs and per-sample tracebacks; -vv: DEBUG (default: warnings only)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    for command in sub.choices.values():  # `slime-tau rollout -v` works as well as `slime-tau -v rollout`
        command.add_argument(
            "-v",
            "--verbose",
            dest="verbose_after",
            action="count",
            default=0,
            help="same as slime-tau -v (default: warnings only)",
        )
    return parser


class SampleTracebackFilter(logging.Filter):
    """Drops the failure boundary's per-sample tracebacks unless ``-v`` (they count as DEBUG for the CLI)."""

    def __init__(self, verbosity: int) -> None:
        super().__init__()
        self.verbosity = verbosity

    def filter(self, record: logging.LogRecord) -> bool:
        return self.verbosity > 0 or not (record.exc_info and record.name == FAILURE_BOUNDARY_LOGGER)


class FlagNamesFilter(logging.Filter):
    """Log lines name the ``rollout`` flags a CLI user typed, not the YAML keys (``tau_user_model`` ->
    ``--user-model``), like the CLI's error lines (``flag_names.in_cli_terms``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from slime_tau_plugin.tools.cli.flag_names import in_cli_terms

        message = record.getMessage()
        if "tau_" in message:
            record.msg, record.args = in_cli_terms(message), None
        return True


class RepeatFilter(logging.Filter):
    """Below ``-v``, a warning that differs from an earlier one only in its ids (task, trial, rid) is dropped.

    A dead endpoint fails every running episode with the same cause; one line says so, the summary counts
    them, and ``-v`` shows each.
    """

    _IDS = re.compile(r" ?\((?:rid|request_id)=[^)]*\)|\b(?:task|trial|rid|request_id|session_id)=\S+ ?")

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        key = (record.name, self._IDS.sub("", record.getMessage()))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def configure_logging(verbosity: int) -> None:
    """One stderr handler on the root logger (unless the host already configured one).

    transformers prints an advisory on import when torch is absent (every CPU run of this CLI: only the
    tokenizer is used); below ``-v`` only its errors show, so an error stays the one line on stderr.
    """
    if verbosity == 0:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(SampleTracebackFilter(verbosity))
    handler.addFilter(FlagNamesFilter())
    if verbosity == 0:
        handler.addFilter(RepeatFilter())
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    """Run one command; as the program (no ``argv``), an interrupted command ends the process at once."""
    if argv is not None:
        return _run(list(argv))
    code = _run(sys.argv[1:])
    if code == EXIT_INTERRUPTED:  # the summary is written: skip the interpreter's teardown, during which
        for stream in (sys.stdout, sys.stderr):  # CPython resets SIGINT to its default and a second Ctrl-C
            stream.flush()  # would kill the process with -2 instead of 130 (and threads stuck in τ calls
        os._exit(code)  # would hold the exit)
    return code


def _run(argv: list[str]) -> int:
    ns = build_parser().parse_args(argv)
    ns.argv = ["slime-tau", *argv]
    ns.verbose += ns.verbose_after
    configure_logging(ns.verbose)
    try:
        return COMMANDS[ns.command].run(ns)
    except ConfigError as exc:  # one line, even where it quotes a multi-line message from a library
        message = " ".join(str(exc).split())
        message = in_cli_terms(message) if ns.command == "rollout" else message
        print(f"slime-tau {ns.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"slime-tau {ns.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
