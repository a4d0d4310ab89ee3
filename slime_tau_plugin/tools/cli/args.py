"""Argument helpers shared by the ``slime-tau`` subcommands: value checks for flags that are no config key, the
help format. (``rollout``'s flags that set a ``TauConfig`` key are generated from its fields: ``flag_names``.)"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (the full usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to every option whose default is a value.

    An on/off flag shows ``(default: off)``; an option whose default is None says its default in its own
    help text (``(default: start the built-in server)``), which reads better than ``(default: None)``.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "(default:" in text or action.default is argparse.SUPPRESS or action.default is None:
            return action.help
        if action.default is False and action.nargs == 0:
            return f"{text} (default: off)"
        return super()._get_help_string(action)


def positive_int(text: str) -> int:
    """argparse ``type=``: an integer >= 1 (argparse prints the message on one line and exits 2)."""
    value = _number(int, text, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is invalid; expected an integer >= 1")
    return value


def non_negative_int(text: str) -> int:
    """argparse ``type=``: an integer >= 0 (a limit where 0 turns it off)."""
    value = _number(int, text, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is invalid; expected an integer >= 0 (0 = off)")
    return value


def port_number(text: str) -> int:
    """argparse ``type=``: a TCP port, 0-65535 (0: any free port)."""
    value = _number(int, text, "an integer")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is invalid; expected a port in 0-65535 (0: any free port)")
    return value


def non_negative_float(text: str) -> float:
    """argparse ``type=``: a number >= 0 (a temperature)."""
    value = _number(float, text, "a number")
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is invalid; expected a number >= 0")
    return value


def share(text: str) -> float:
    """argparse ``type=``: a share of samples, 0 to 1."""
    value = _number(float, text, "a number")
    if not 0 <= value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is invalid; expected a share from 0 to 1, e.g. 0.1")
    return value


def positive_float(text: str) -> float:
    """argparse ``type=``: a number > 0 (a timeout in seconds)."""
    value = _number(float, text, "a number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is invalid; expected a number > 0")
    return value


def _number(kind: type, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


ENGINE_TOKENIZER_HINT = "(tau_tokenizer_path or slime's --hf-checkpoint)"
"""How the engine names the tokenizer setting in its errors; a CLI command names its own flag instead."""


def load_tokenizer_for(flag: str, path: str) -> Any:
    """The tokenizer in ``path``; a failure names ``flag`` (``--model``, ``--tokenizer``), not slime's keys.

    Raises:
        ConfigError: no such directory, or no tokenizer in it.
    """
    from slime_tau_plugin.engine.chat.templates import load_tokenizer
    from slime_tau_plugin.engine.errors import ConfigError

    try:
        return load_tokenizer(path)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace(ENGINE_TOKENIZER_HINT, f"to {flag}")) from None
