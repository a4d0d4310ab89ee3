"""The closed sets of choices in config, as enums: the YAML/CLI value is the member's value.

Config turns each ``tau_*`` string into one of these at its boundary (``config.py``); everything past it
compares members, never strings. A new value is one member here plus one line in the registry that
maps it to its implementation (``policy.POLICY_CLIENTS``, ``users.USER_SIMULATORS``). Imports nothing
from the package but ``errors``.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from slime_tau_plugin.engine.errors import ConfigError

E = TypeVar("E", bound=enum.Enum)


class Choice(str, enum.Enum):
    """A config choice: a ``str`` whose ``str()`` and f-string form are its value, like Python 3.11's
    ``StrEnum`` (which this package cannot use: it supports Python 3.10, what many verl images run)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class PolicyApi(Choice):
    """``tau_policy_api``: the policy server's wire protocol."""

    SGLANG = "sglang"
    """SGLang's native ``/generate`` (``policy/sglang.py``)."""
    OPENAI_COMPLETIONS = "openai-completions"
    """``/v1/completions`` with a token-id prompt and log-probs, as vLLM serves it (``policy/openai.py``)."""
    NEMO_RL = "nemo-rl"
    """NeMo RL's vLLM servers: ``/v1/chat/completions`` with ``required_prefix_token_ids`` (``policy/nemo_rl.py``)."""


class UserKind(Choice):
    """``tau_user``: who plays the customer."""

    SCRIPTED = "scripted"
    """No LLM: the task's instruction, its user-side gold actions, then a stop (``users.ScriptedUser``)."""
    LLM = "llm"
    """τ's user simulator on an OpenAI-compatible endpoint (``users.LLMUser``)."""


class RewardMode(Choice):
    """``tau_reward_mode``: how a finished episode is scored (both equal τ's evaluation)."""

    FAST = "fast"
    """The cached gold outcome compared with the live state."""
    REFERENCE = "reference"
    """τ's own evaluation (slow: it rebuilds environments)."""


class NLAssertionMode(Choice):
    """``tau_nl_assertions``: what τ³ tasks with natural-language assertions do."""

    JUDGE = "judge"
    EXCLUDE = "exclude"
    """Leave them out of the reward (said in ``reward_info``)."""


class ToolsInPrompt(Choice):
    """``tau_tools_in_prompt``: how τ's tool schemas reach the model's prompt."""

    TEMPLATE = "template"
    """The chat template renders them (``tools=``); a template that ignores them is refused."""
    SYSTEM = "system"
    """Appended to the system message, with the call format of ``tau_tool_call_parser`` (``tool_prompt.py``)."""


class WorkerKind(Choice):
    """``tau_episode_worker_kind``: where ``tau_episode_workers`` play episodes (``engine/workers``)."""

    PROCESS = "process"
    """Local worker processes on the trainer's node (``workers/process_pool.py``)."""
    RAY = "ray"
    """Ray actors on the cluster's CPUs (``workers/ray_actors.py``)."""


class AgentErrorRule(Choice):
    """``tau_agent_error_rule``: which agent turns end the episode ``agent_error`` (scored 0), as τ²'s orchestrator.

    Visible text only: reasoning a reasoning parser splits off is not text.
    """

    OFF = "off"
    """No rule (τ-bench v1: a turn with a tool call acts on the call and drops the text)."""
    EMPTY = "empty"
    """A turn with neither text nor a tool call (τ²'s ``AssistantMessage.validate`` refuses it in every run)."""
    STRICT = "strict"
    """Also text together with a tool call: τ²'s ``_check_communication_error``, which ``tau2 run`` applies only
    with ``--enforce-communication-protocol`` (``Orchestrator(validate_communication=True)``)."""


def parse_choice(kind: type[E], key: str, value: object) -> E:
    """``value`` as a member of ``kind``.

    Raises:
        ConfigError: naming ``key``, the value and the valid values.
    """
    try:
        return kind(value)
    except ValueError:
        valid = ", ".join(sorted(str(m.value) for m in kind))
        raise ConfigError(f"{key}={value!r} is unknown; expected one of {valid}") from None
