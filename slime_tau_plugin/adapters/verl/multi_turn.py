"""verl's ``actor_rollout_ref.rollout.multi_turn`` knobs under ``TauAgentLoop``: each honoured or refused in one line.

verl's knobs are written for its own ``ToolAgentLoop`` (its tools, its parser, its truncation). τ's loop plays τ's
episode as slime's path does (τ's tools, every tool call of a turn executed, each tool response shown whole, the
ids the model saw trained), so a knob that would change that is refused unless it holds verl's default, which
applies to ``ToolAgentLoop`` only (docs/verl.md, "verl's multi_turn knobs"). A knob verl adds later is refused too
unless it holds its default. Imports verl only inside :func:`check_multi_turn`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError

PREFIX = "actor_rollout_ref.rollout.multi_turn"

_ANY: Callable[[Any, Any], bool] = lambda value, default: True  # noqa: E731
_DEFAULT: Callable[[Any, Any], bool] = lambda value, default: value == default  # noqa: E731
_NULL: Callable[[Any, Any], bool] = lambda value, default: value is None  # noqa: E731

RULES: dict[str, tuple[Callable[[Any, Any], bool], str]] = {
    "enable": (lambda v, d: bool(v), "must be true: τ episodes are multi-turn"),
    "max_assistant_turns": (_ANY, "honoured: caps tau_max_turns"),
    "max_user_turns": (
        _NULL,
        "is not applied by τ's loop (an episode ends by τ's rules, tau_max_turns or the token budgets); set it null",
    ),
    "max_parallel_calls": (
        _DEFAULT,
        "is not applied by τ's loop (every tool call of a turn runs, as in τ and slime's path); leave verl's default",
    ),
    "max_tool_response_length": (
        _DEFAULT,
        "is not applied by τ's loop (a tool response is shown whole; its ids count against rollout.response_length); "
        "leave verl's default",
    ),
    "tool_response_truncate_side": (_DEFAULT, "is not applied by τ's loop (tool responses are never cut)"),
    "tool_config_path": (_NULL, "is not read by τ's loop (τ's environment brings its tools); set it null"),
    "function_tool_path": (_NULL, "is not read by τ's loop (τ's environment brings its tools); set it null"),
    "format": (_DEFAULT, "is not read by τ's loop; set the parser with tau_tool_call_parser"),
    "use_inference_chat_template": (
        lambda v, d: not v,
        "must be false: τ's loop trains on exactly the ids the model saw, never a re-rendered chat",
    ),
    "tokenization_sanity_check_mode": (_ANY, "honoured trivially: τ's loop never re-tokenizes, so nothing can differ"),
    "num_repeat_rollouts": (_NULL, "is not read by τ's loop (rollout.n sets the repeats); set it null"),
}
"""Each knob: (is the value accepted, given verl's default; what the refusal says, or what honouring means)."""


def check_multi_turn(multi_turn: Mapping[str, Any] | None) -> None:
    """Refuse, in one line naming the key, a ``multi_turn`` knob τ's loop would not apply.

    Raises:
        ConfigError: the first such knob.
    """
    from verl.workers.config import MultiTurnConfig

    defaults = {f.name: f.default for f in dataclasses.fields(MultiTurnConfig)}
    for key, value in (multi_turn or {}).items():
        if str(key).startswith("_"):  # Hydra's _target_
            continue
        accepted, why = RULES.get(str(key), (_DEFAULT, "is unknown to slime_tau_plugin; leave verl's default"))
        if not accepted(value, defaults.get(str(key))):
            default = f" (verl's default: {defaults[key]})" if key in defaults and accepted(defaults[key], None) else ""
            raise ConfigError(f"{PREFIX}.{key}={value} {why}{default}")
