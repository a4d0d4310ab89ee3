"""One running episode's live parts, and the timed calls that reach τ and the user simulator off the loop.

:class:`LiveEpisode` is what an episode accumulates while it plays; it ends as an :class:`EpisodeResult`
(``result``) or, when the trainer stops it before its end, as an :class:`EpisodeState` (``to_state``): the
value that resumes it later, anywhere. :class:`EpisodeCalls` is the one seam where synchronous τ code and
the user simulator are awaited: it times each call into the episode and turns unexpected failures into the
package's error types. The runner (``loop/run.py``) and the start/resume code (``loop/start.py``) share it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser
from slime_tau_plugin.engine.episode.cost import ChatCost, CustomerCost
from slime_tau_plugin.engine.episode.limits import StepLedger
from slime_tau_plugin.engine.episode.result import EpisodeCounters, EpisodeResult, EpisodeTimings, TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState, segment_states
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import EnvBackendError, FailedEndpoint, TauPluginError, UserSimulatorError
from slime_tau_plugin.engine.loop.blocking import run_blocking
from slime_tau_plugin.engine.loop.env_log import RecordingSession
from slime_tau_plugin.engine.net.stats import ChatMeter, NetStats
from slime_tau_plugin.engine.users.simulators import UserSimulator, UserTurn

T = TypeVar("T")


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
    """What one running episode accumulates; frozen into a result at its end or a state when suspended."""

    task: TaskRef
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
    ended: TerminationReason | None = None
    """Set when the episode is over before the model's first turn (a task whose history ends with the user's stop)."""

    def active_s(self) -> float:
        return self.active_before_s + time.perf_counter() - self.t0

    def customer_cost(self) -> CustomerCost:
        """What the customer and its review have cost so far, earlier legs included."""
        net = self.net
        now = CustomerCost(_frozen(net.user_chat), _frozen(net.judge_chat), self.review_cpu_s, self.active_s())
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


class EpisodeCalls:
    """Timed, off-loop calls for one engine: τ code in the bounded pool, the user simulator awaited."""

    def __init__(self, timeout_s: float, workers: int) -> None:
        self.timeout_s = timeout_s
        self.workers = workers

    async def env(self, ep: LiveEpisode, fn: Callable[..., T], *args: Any) -> T:
        """A timed τ call off the loop (reset, step, reward); failures become EnvBackendError."""
        t0 = time.perf_counter()
        try:
            return await self.blocking(fn, *args, error=EnvBackendError)
        finally:
            ep.env_s += time.perf_counter() - t0

    async def user(self, ep: LiveEpisode, awaitable: Awaitable[T]) -> T:
        """Await a user-simulator step; its unexpected failures become UserSimulatorError."""
        t0 = time.perf_counter()
        try:
            return await awaitable
        except TauPluginError:
            raise
        except Exception as exc:
            raise UserSimulatorError(f"user simulator failed: {type(exc).__name__}: {exc}") from exc
        finally:
            ep.user_s += time.perf_counter() - t0

    def runner(self, error: type[TauPluginError]) -> Callable[..., Awaitable[Any]]:
        """``await run(fn, *args)``: what a user simulator gets to reach its tools."""

        async def run(fn, *args):
            return await self.blocking(fn, *args, error=error)

        return run

    async def blocking(self, fn: Callable[..., T], *args: Any, error: type[TauPluginError]) -> T:
        """Run τ code off the loop; translate its failures into our error type at this seam."""
        try:
            return await run_blocking(fn, *args, timeout=self.timeout_s, workers=self.workers)
        except TauPluginError:
            raise
        except TimeoutError as exc:
            raise error(f"{getattr(fn, '__name__', fn)} timed out after {self.timeout_s}s") from exc
        except Exception as exc:
            raise error(f"{getattr(fn, '__name__', fn)} failed: {type(exc).__name__}: {exc}") from exc
