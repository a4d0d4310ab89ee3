"""The typed outcome of one episode: why it ended, what it earned, what it cost.

Every front door (slime's ``generate``, the CLI, verl) and every env backend reads these types, never
their string values: renaming a value cannot silently change how an episode is scored or labelled.
This module imports nothing from the rest of the package except ``TaskRef``'s home (``task_ref``), the
trajectory, the suspended-episode value (``state``), the error tree (``FailedEndpoint``) and the
review's ``Verdict``, and nothing from slime, verl or τ.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from slime_tau_plugin.engine.episode.cost import CustomerCost
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import FailedEndpoint
from slime_tau_plugin.engine.review.verdict import Verdict


class SampleStatus(str, enum.Enum):
    """A trainer-neutral sample status; members and values equal slime's ``Sample.Status``.

    The CLI's samples use it as their status type; slime's own enum is reached by member name
    (``Sample.Status[status.name]``), verl's ``extra_fields["status"]`` is the value.
    """

    PENDING = "pending"
    """Not played yet (slime's initial status; never an episode's outcome)."""
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


class TerminationReason(str, enum.Enum):
    """Why an episode ended. Values are what ``metadata["termination_reason"]`` shows."""

    USER_STOP = "user_stop"
    """The simulated user ended the conversation (τ's ``###STOP###`` and friends)."""
    AGENT_STOP = "agent_stop"
    """A tool call ended it (e.g. a transfer to a human agent)."""
    MAX_TURNS = "max_turns"
    """``tau_max_turns`` model turns (τ-bench v1's ``max_num_steps``)."""
    MAX_STEPS = "max_steps"
    """τ²'s step limit (``tau_max_steps`` in τ²'s unit); not scored, as in τ²."""
    TOO_MANY_ERRORS = "too_many_errors"
    """τ²'s ``max_errors`` tool errors (agent + user tools); not scored, as in τ²."""
    AGENT_ERROR = "agent_error"
    """The policy broke τ²'s message rule (``tau_agent_error_rule``): not scored, still trained on (reward 0)."""
    BUDGET = "budget_exhausted"
    """The next turn or continuation would not fit the context or response budget."""
    LENGTH = "length"
    """The policy hit ``max_new_tokens`` mid-turn."""
    CONTEXT_LENGTH = "context_length"
    """The server refused the request as too long for the model's context."""
    ABORTED = "aborted"
    """The engine aborted a request, or the trainer aborted the rollout between turns."""
    DEADLINE = "deadline"
    """``tau_episode_timeout_s`` passed: TRUNCATED, not scored, not trained on (the wall clock measures the
    servers, not the policy; a reward of 0 would teach it about latency), dropped from group statistics."""
    USER_TOKEN_BUDGET = "user_token_budget"
    """The LLM user's token budget (``tau_user_token_budget_per_step`` / ``_total``) is spent: TRUNCATED, not
    scored, not trained on, dropped from group statistics, like ``deadline``."""
    ENV_ERROR = "env_error"
    USER_ERROR = "user_error"
    """The user simulator failed, or (``failed_endpoint`` customer) the review found a customer error that changed
    the outcome: FAILED, not trained on, not scored in pass^k."""
    POLICY_ERROR = "policy_error"

    @property
    def is_scored(self) -> bool:
        """τ scores only episodes the user or a terminating tool ended; any other end earns 0."""
        return self in (TerminationReason.USER_STOP, TerminationReason.AGENT_STOP)

    @property
    def is_failure(self) -> bool:
        """An external failure: the sample must not train (reward 0, loss mask 0, removed)."""
        return self in (TerminationReason.ENV_ERROR, TerminationReason.USER_ERROR, TerminationReason.POLICY_ERROR)

    @property
    def is_trainable(self) -> bool:
        """The one "must not train" rule of every front door: failures and aborts add no gradient
        (mask and log-probs 0, reward 0; slime also drops them with ``remove_sample``)."""
        return not (self.is_failure or self is TerminationReason.ABORTED or self.is_cut_off)

    @property
    def is_removed(self) -> bool:
        """slime must drop the sample (``remove_sample``): it neither trains nor enters group statistics. An
        abort is not: slime discards aborted samples itself."""
        return self.is_failure or self.is_cut_off

    @property
    def is_cut_off(self) -> bool:
        """Ended by a run-level limit (the deadline, the user's token budget), not by anything the policy did:
        never trained on, dropped from group statistics, not an endpoint failure."""
        return self in (TerminationReason.DEADLINE, TerminationReason.USER_TOKEN_BUDGET)

    @property
    def status(self) -> SampleStatus:
        """The status a trainer records (docs/ARCHITECTURE.md, Invariants)."""
        if self.is_scored:
            return SampleStatus.COMPLETED
        if self.is_failure:
            return SampleStatus.FAILED
        if self is TerminationReason.ABORTED:
            return SampleStatus.ABORTED
        return SampleStatus.TRUNCATED


@dataclass(frozen=True, slots=True)
class EpisodeCounters:
    """Per-episode counts an RL engineer watches (each lands in ``sample.metadata`` under its name)."""

    tool_calls: int = 0
    tool_errors: int = 0
    """Tool calls the environment answered with an error."""
    parse_errors: int = 0
    """Model turns whose tool call was malformed or unknown (fed back to the model as an error)."""
    template_fallbacks: int = 0
    """Continuations that could not be proven prefix-safe and were rendered the unsafe way."""
    user_tool_errors: int = 0
    """The simulated user's tool calls answered with an error (τ² counts them toward ``max_errors``)."""

    def plus(self, **deltas: int) -> EpisodeCounters:
        """These counts with ``deltas`` added (the engine counts with it; a misspelt name raises AttributeError)."""
        return replace(self, **{name: getattr(self, name) + n for name, n in deltas.items()})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class EpisodeTimings:
    """Where an episode's wall time went (seconds; the parts overlap nothing, the rest is our own CPU)."""

    policy_s: float = 0.0
    """Waiting on ``/generate``."""
    env_s: float = 0.0
    """τ calls: reset, tool steps, reward."""
    user_s: float = 0.0
    """The user simulator (LLM calls, scripted replies, its device tools)."""
    total_s: float = 0.0

    def as_metadata(self) -> dict[str, float]:
        return {
            "episode_wall_s": round(self.total_s, 4),
            "time_policy_s": round(self.policy_s, 4),
            "time_env_s": round(self.env_s, 4),
            "time_user_s": round(self.user_s, 4),
        }


@dataclass(frozen=True, slots=True)
class EpisodeResult:
    """Everything a front door needs to fill a training sample."""

    task: TaskRef
    termination: TerminationReason
    trajectory: Trajectory | None
    """None only if the episode failed before its prompt existed."""
    reward: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)
    num_turns: int = 0
    counters: EpisodeCounters = EpisodeCounters()
    steps: int = 0
    """Messages as τ²'s orchestrator counts them (``tau_max_steps``'s unit)."""
    messages: tuple[dict[str, Any], ...] = ()
    """The conversation as chat messages (assistant content = the model's raw text)."""
    tools: tuple[dict[str, Any], ...] = ()
    tau_messages: tuple[dict[str, Any], ...] = ()
    """τ's own message log (``EnvSession.tau_messages``): what a τ² leaderboard trajectory holds."""
    error: str | None = None
    failed_endpoint: FailedEndpoint | None = None
    """The collaborator a FAILED episode failed on (set from the error that ended it); None otherwise."""
    env_info: dict[str, str] = field(default_factory=dict)
    """Which τ distribution and version scored it."""
    timings: EpisodeTimings = EpisodeTimings()
    template_mode: str = ""
    """How the chat template's continuations were computed (``templates.TemplateMode``: ``anchored`` or
    ``rendered_history``); empty when the episode failed before its template was known."""
    tools_in_prompt: str = ""
    """How the tool schemas reached the prompt (``choices.ToolsInPrompt``: ``template`` or ``system``)."""
    net_info: dict[str, Any] = field(default_factory=dict)
    """Retries, outage and slot waits, the LLM user's identity, seed and token usage (``endpoints.NetStats``),
    and how often the episode was suspended and resumed (``loop/live.py``'s ``ResumeStats``)."""
    state: EpisodeState | None = None
    """An ABORTED episode's resumable state, when its caller asked to suspend (``run_episode(suspend=True)``)."""
    review: Verdict | None = None
    """What the review of the customer found (``review/``); None when the episode was not reviewed."""
    cost: CustomerCost = CustomerCost()
    """What the customer and its review cost (``cost.py``): requests, tokens, waits; zeros for the scripted one."""
