"""One running episode's state: :class:`LiveEpisode`, and the :class:`TurnState` its turn loop stands in.

:class:`LiveEpisode` is the one state of a running episode (verl's ``AgentData``, τ²'s ``Orchestrator`` state):
the request's options, what the episode accumulates and the turn in progress, read and written by each
:class:`TurnState`'s method (``loop/turns.py``). It ends as an :class:`EpisodeResult` (``result``) or, when the
trainer stops it before its end, as an :class:`EpisodeState` (``to_state``): the value that resumes it later,
anywhere. It holds state only: the calls that reach τ and the user simulator off the loop, timed into it, are
``blocking.EpisodeCalls``.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.chat.tool_calls import ParsedAction, ToolCallParser
from slime_tau_plugin.engine.episode.cost import ChatCost, CustomerCost
from slime_tau_plugin.engine.episode.limits import StepLedger
from slime_tau_plugin.engine.episode.request import EpisodeOptions
from slime_tau_plugin.engine.episode.result import EpisodeCounters, EpisodeResult, EpisodeTimings, TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState, segment_states
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.episode.trajectory import TokenBudget, Trajectory
from slime_tau_plugin.engine.errors import FailedEndpoint
from slime_tau_plugin.engine.loop.env_log import RecordingSession
from slime_tau_plugin.engine.net.stats import ChatMeter, NetStats
from slime_tau_plugin.engine.users.simulators import UserSimulator, UserTurn


class TurnState(enum.Enum):
    """Where a turn of the episode loop stands (``TurnLoop.play``): each state's step returns the next."""

    GENERATING = "generating"
    """Between-turn checks (turn limit, abort, deadline, budget), then the policy generates the model turn."""
    PARSING = "parsing"
    """The model's text becomes an action (tool calls, a reply to the user, or an invalid call)."""
    ACTING = "acting"
    """τ's tools or the user simulator answer the action."""
    CONTINUING = "continuing"
    """The chat template's continuation ids join the trajectory; the next turn begins."""
    ENDED = "ended"
    """A :class:`TerminationReason` ended the episode."""


@dataclass(frozen=True, slots=True)
class ResumeStats:
    """How much of an episode came from earlier steps (slime's partial rollout): each sample's metadata."""

    suspensions: int = 0
    """Times the episode was suspended and resumed."""
    turns_reused: int = 0
    """Policy turns played before the latest resume (not redrawn)."""

    def as_metadata(self) -> dict[str, int]:
        return {"tau_suspensions": self.suspensions, "tau_turns_reused": self.turns_reused}


@dataclass(slots=True)
class LiveEpisode:
    """The one state of a running episode: how it plays, what it accumulates, the turn in progress; frozen into a
    result at its end or a state when suspended."""

    task: TaskRef
    sampling_params: dict[str, Any] = field(default_factory=dict)
    """The trainer's sampling parameters (the boundary's copy: a trainer may share one dict across samples)."""
    options: EpisodeOptions = EpisodeOptions()
    """How the trainer plays it: the request's options, a suspended state already loaded."""
    rid_prefix: str = ""
    """The policy's request ids are ``{rid_prefix}-{turn}``: the session id, or a random one."""
    t0: float = field(default_factory=time.perf_counter)
    session: RecordingSession | None = None
    user: UserSimulator | None = None
    template: ChatTemplate | None = None
    parser: ToolCallParser | None = None
    trajectory: Trajectory | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    num_turns: int = 0
    open_turn: list[int] = field(default_factory=list)
    """Ids of the current model turn generated so far (non-empty only while a turn is cut mid-generation)."""
    counters: EpisodeCounters = EpisodeCounters()
    ledger: StepLedger = field(default_factory=StepLedger)
    """τ²'s step and error counts (``limits.py``)."""
    policy_s: float = 0.0
    env_s: float = 0.0
    user_s: float = 0.0
    active_before_s: float = 0.0
    """Wall time played before the latest resume."""
    net: NetStats = field(default_factory=NetStats)
    """Retries, waits and user usage (``endpoints.py``); also the episode's deadline."""
    user_info: dict[str, Any] = field(default_factory=dict)
    resumed: ResumeStats = ResumeStats()
    cost_before: CustomerCost = CustomerCost()
    """What the customer cost on earlier legs (a resumed episode)."""
    review_cpu_s: float = 0.0
    """CPU time of the review's deterministic checks (``loop/review.py``)."""
    guidelines: str | None = None
    """Which user-simulator guidelines the customer runs (``TauConfig.user_guidelines_label``): in its cost."""
    ended: TerminationReason | None = None
    """Why the episode ended: set by the turn state that ends it, or before the model's first turn (a task whose
    history ends with the user's stop)."""
    budget: TokenBudget | None = None
    """The episode's token caps (``TurnLoop.token_budget``), set when its turns begin."""
    turn: int = 0
    """0-based index of the model turn being played."""
    output: list[int] = field(default_factory=list)
    """The model turn's ids (a resumed open turn's included)."""
    text: str = ""
    """The model turn decoded."""
    action: ParsedAction | None = None
    """The model turn parsed: tool calls, a reply to the user, or an invalid call."""
    answers: list[dict[str, Any]] = field(default_factory=list)
    """What the tools or the user answered: the messages the model sees next."""

    def end(self, reason: TerminationReason) -> TurnState:
        """End the episode with ``reason`` (the state every turn state returns last)."""
        self.ended = reason
        return TurnState.ENDED

    def active_s(self) -> float:
        return self.active_before_s + time.perf_counter() - self.t0

    def customer_cost(self) -> CustomerCost:
        """What the customer and its review have cost so far, earlier legs included."""
        net = self.net
        now = CustomerCost(
            _frozen(net.user_chat), _frozen(net.judge_chat), self.review_cpu_s, self.active_s(), self.guidelines
        )
        return now.plus(self.cost_before)

    def count_user_turn(self, turn: UserTurn) -> None:
        """τ²'s steps and errors for a user message: one step for it, two per tool call it made first (the call
        and its answers), and the errors those answers had."""
        self.ledger.message(1 + 2 * turn.tool_rounds)
        self.ledger.errors += turn.tool_errors
        self.counters = self.counters.plus(user_tool_errors=turn.tool_errors)

    def result(
        self,
        termination: TerminationReason,
        env_info: dict[str, str],
        *,
        reward: float = 0.0,
        reward_info: dict[str, Any] | None = None,
        error: str | None = None,
        failed_endpoint: FailedEndpoint | None = None,
        state: EpisodeState | None = None,
    ) -> EpisodeResult:
        return EpisodeResult(
            task=self.task,
            termination=termination,
            trajectory=self.trajectory,
            reward=reward,
            reward_info=reward_info or {},
            num_turns=self.num_turns,
            counters=self.counters,
            steps=self.ledger.steps,
            messages=tuple(self.messages),
            tools=tuple(self.session.tools if self.session is not None else ()),
            tau_messages=tuple(self.session.tau_messages() if self.session is not None else ()),
            error=error,
            failed_endpoint=failed_endpoint,
            env_info=env_info,
            timings=EpisodeTimings(self.policy_s, self.env_s, self.user_s, self.active_s()),
            net_info={**self.net.as_metadata(), **self.user_info, **self.resumed.as_metadata()},
            template_mode=self.template.mode.value if self.template is not None else "",
            tools_in_prompt=self.template.tools_in.value if self.template is not None else "",
            state=state,
            cost=self.customer_cost(),
        )

    def to_state(self, env_hash: str) -> EpisodeState:
        """The value this episode resumes from (``env_hash``: the session's ``state_hash`` now)."""
        traj, task = self.trajectory, self.task
        return EpisodeState(
            benchmark=task.benchmark,
            domain=task.domain,
            split=task.split,
            task_id=task.task_id,
            task=task.task,
            prompt_ids=traj.prompt_ids,
            segments=segment_states(traj),
            open_turn_ids=len(self.open_turn),
            messages=tuple(self.messages),
            num_turns=self.num_turns,
            counters=self.counters.as_dict(),
            steps=self.ledger.steps,
            errors=self.ledger.errors,
            actions=tuple(self.session.log),
            env_hash=env_hash,
            user=self.user.snapshot(),
            template_mode=self.template.mode.value,
            active_s=self.active_s(),
            policy_s=self.policy_s,
            env_s=self.env_s,
            user_s=self.user_s,
            net_retries=self.net.retries,
            customer_cost=self.customer_cost().as_metadata(),
            suspensions=self.resumed.suspensions + 1,
            turns_before=self.num_turns,
        )


def _frozen(meter: ChatMeter) -> ChatCost:
    return ChatCost(meter.requests, meter.failed, meter.prompt_tokens, meter.completion_tokens, meter.wait_s)
