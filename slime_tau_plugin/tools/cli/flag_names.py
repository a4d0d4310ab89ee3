"""``rollout``'s flags that set a ``TauConfig`` key, generated from the model's fields: one place per key.

Each flag is ``--`` + the field name with dashes; its type check, choices, default and help are the field's
(``engine/config/tau_config.py``), so a value the config would refuse is refused by argparse in one line naming the
flag. The CLI knows which flag fed which field (:func:`cli_key`), so ``TauConfig.from_values`` names the
flag in its errors. Two keys keep a flag of their own, written in ``rollout.py`` because their defaults are
the CLI's (``--tokenizer``, ``--sglang-url``). What the engine writes while a run plays (log lines, a
sample's error) still names the YAML key: :func:`in_cli_terms` shows those with the flag.
"""

from __future__ import annotations

import argparse
import enum
import re
from typing import Any

from slime_tau_plugin.engine.config.fields import choices, tau_key, value_type
from slime_tau_plugin.engine.config.tau_config import TauConfig, coerce_field
from slime_tau_plugin.engine.errors import ConfigError

TASK_FLAGS = ("benchmark", "domain", "split", "retrieval_variant")
POLICY_FLAGS = ("policy_api", "policy_model", "tool_call_parser", "reasoning_parser", "tools_in_prompt")
BUDGET_FLAGS = ("max_context_len", "max_turns")
TERMINATION_FLAGS = ("max_errors", "max_steps", "agent_error_rule")
"""τ's own ending rules (``limits.EpisodeLimits``); unset, each is the benchmark's default (``TauConfig.limits``)."""
RELIABILITY_FLAGS = (
    "outage_tolerance_s",
    "retry_budget",
    "policy_max_inflight",
    "user_max_inflight",
    "episode_timeout_s",
)
"""Outages, retries, in-flight bounds and the episode deadline (``endpoints.py``)."""
WORKER_FLAGS = ("episode_workers", "episode_worker_kind", "episode_worker_cpus")
"""Where episodes run (``engine/workers``): this process, worker processes or Ray actors."""
USER_FLAGS = ("user",)
LLM_USER_FLAGS = (
    "user_base_url",
    "user_model",
    "user_api_key_env",
    "user_temperature",
    "user_cache_size",
    "user_guidelines_file",
    "user_token_budget_per_step",
    "user_token_budget_total",
)
"""For ``--user llm`` only: unset by default, so ``check_flags`` can refuse one given without it."""
REWARD_FLAGS = (
    "reward_mode",
    "nl_assertions",
    "judge_base_url",
    "judge_model",
    "judge_api_key_env",
    "judge_timeout_s",
    "judge_retries",
)
REVIEW_FLAGS = ("review_judge_share",)
"""The customer review's judge share: measuring τ²'s rubric on a judge endpoint (benchmarks/user_review_judge.py)."""
CONFIG_FLAGS = (
    *TASK_FLAGS,
    *POLICY_FLAGS,
    *BUDGET_FLAGS,
    *TERMINATION_FLAGS,
    *RELIABILITY_FLAGS,
    *WORKER_FLAGS,
    *USER_FLAGS,
    *LLM_USER_FLAGS,
    *REWARD_FLAGS,
    *REVIEW_FLAGS,
)
"""Every ``TauConfig`` field with a generated ``rollout`` flag of the same name."""

FLAG_OF = {
    "tokenizer_path": "--tokenizer",
    "policy_url": "--sglang-url",
    **{name: "--" + name.replace("_", "-") for name in CONFIG_FLAGS},
}
"""``TauConfig`` field → the ``rollout`` flag that sets it."""

DEFAULT_TEXT = {
    "user_base_url": "a built-in scripted chat server",
    "split": "train, or the domain's one split, e.g. mock's base",
}
"""Where the CLI's unset differs from the config's: what it does instead (shown in ``--help``)."""


def cli_key(name: str) -> str:
    """How a CLI message names field ``name``: its flag, else its YAML key (``tau_<name>``)."""
    return FLAG_OF.get(name) or tau_key(name)


def add_config_flags(parser: Any, names: tuple[str, ...], *, unset: bool = False) -> None:
    """Add one flag per ``TauConfig`` field in ``names`` to ``parser`` (a parser or an argument group).

    ``unset``: the flags default to None (the config's default applies), not to the config's default value.
    """
    for name in names:
        field = TauConfig.model_fields[name]
        kind, _ = value_type(field)
        default = None if unset or field.default is None else field.default
        default = default.value if isinstance(default, enum.Enum) else default
        text = field.description or ""
        if "(default:" not in text and default is None:
            shown = DEFAULT_TEXT.get(name, field.default)
            shown = "none" if shown is None else shown.value if isinstance(shown, enum.Enum) else shown
            text = f"{text} (default: {shown})"
        options = choices(field)
        parser.add_argument(
            FLAG_OF[name],
            dest=name,
            default=default,
            choices=options,
            type=None if options is not None or kind is str else _flag_type(name),
            metavar=_metavar(name, kind) if options is None else None,
            help=text,
        )


def _metavar(name: str, kind: type) -> str | None:
    """How ``--help`` names a flag's value: N, S (seconds), URL, VAR, NAME; else argparse's (the flag in capitals)."""
    if kind is int:
        return "N"
    suffixes = {"_s": "S", "_url": "URL", "_env": "VAR", "_model": "NAME", "_parser": "NAME"}
    return next((shown for suffix, shown in suffixes.items() if name.endswith(suffix)), None)


def config_values(ns: argparse.Namespace) -> dict[str, Any]:
    """The ``TauConfig`` values the generated flags hold (unset ones left to the config's defaults)."""
    return {name: getattr(ns, name) for name in CONFIG_FLAGS if getattr(ns, name) is not None}


def _flag_type(name: str) -> Any:
    """argparse ``type=`` for field ``name``: the config's own type and range check, as a one-line usage error."""

    def parse(text: str) -> Any:
        try:
            return coerce_field(name, text, key="")
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


_KEY = re.compile(r"\btau_([a-z0-9_]+)\b")


def in_cli_terms(text: str) -> str:
    """A run-time message from the engine (log line, sample error) with each ``tau_<field>`` that has a rollout
    flag shown as that flag; configuration errors need no rewriting (:func:`cli_key` names the flag)."""
    return _KEY.sub(lambda m: FLAG_OF.get(m[1], m[0]), text)
