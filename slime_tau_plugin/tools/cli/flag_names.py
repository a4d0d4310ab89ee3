"""``tau_*`` config names in messages, rewritten as the ``rollout`` flags a CLI user typed.

``TauConfig`` and the policy/user clients speak slime YAML (``tau_user_model``) because that is what a
training run sets; a ``slime-tau rollout`` user set ``--user-model`` and should read that name. Keys with
no flag stay as they are.
"""

from __future__ import annotations

import re

USER_AND_REWARD_FLAGS = (
    "policy_api",
    "policy_model",
    "user",
    "user_base_url",
    "user_model",
    "user_api_key_env",
    "user_temperature",
    "reward_mode",
    "nl_assertions",
    "judge_base_url",
    "judge_model",
    "judge_api_key_env",
    "judge_timeout_s",
    "judge_retries",
)
"""``rollout`` flags passed to ``TauConfig`` unchanged (same names)."""

TERMINATION_FLAGS = ("max_errors", "max_steps", "agent_error_rule")
"""``rollout`` flags for τ's own ending rules (``limits.EpisodeLimits``), passed to ``TauConfig`` unchanged;
unset, each is the benchmark's default (``TauConfig.limits``)."""

RELIABILITY_FLAGS = (
    "outage_tolerance_s",
    "retry_budget",
    "policy_max_inflight",
    "user_max_inflight",
    "episode_timeout_s",
)
"""``rollout`` flags for outages, retries, in-flight bounds and the episode deadline (``endpoints.py``), passed to
``TauConfig`` unchanged; unset, each is ``TauConfig``'s default."""

FLAG_OF = {
    "tokenizer_path": "--tokenizer",
    "policy_url": "--sglang-url",
    **{
        name: "--" + name.replace("_", "-")
        for name in (
            "benchmark",
            "domain",
            "split",
            "max_context_len",
            "max_turns",
            "tool_call_parser",
            "reasoning_parser",
            *USER_AND_REWARD_FLAGS,
            *TERMINATION_FLAGS,
            *RELIABILITY_FLAGS,
        )
    },
}
"""``TauConfig`` field → the ``rollout`` flag that sets it."""

_KEY = re.compile(r"\btau_([a-z0-9_]+)\b")


def in_cli_terms(text: str) -> str:
    """``text`` with every ``tau_<field>`` that has a rollout flag replaced by that flag."""
    return _KEY.sub(lambda m: FLAG_OF.get(m[1], m[0]), text)
