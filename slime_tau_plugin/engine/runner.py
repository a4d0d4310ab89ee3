"""The episode engine: :class:`EpisodeEngine` plays one τ task against an injected policy.

generate -> parse -> act -> continue, until a :class:`TerminationReason`; τ's own ending rules
(``limits.py``: τ²'s error and step limits, its agent-error rule) are asked where τ asks them. Every id
the policy sampled is kept unchanged (mask 1) and every continuation comes from the chat template (mask 0): see
``trajectory.py`` and ``templates.py``. τ calls go through ``run_blocking``. The engine takes what the
process shares (``resources.EpisodeResources``) and this episode's policy; it never imports slime or
verl, and never picks a policy class itself. Front doors call :func:`run_episode`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slime_tau_plugin.engine.blocking import run_blocking
from slime_tau_plugin.engine.choices import UserKind
from slime_tau_plugin.engine.endpoints import EndpointRole, GuardSettings, NetStats, episode_stats, guard_for
from slime_tau_plugin.engine.envs import EnvSession, EnvToolCall, TaskRef
from slime_tau_plugin.engine.episode import EpisodeCounters, EpisodeResult, EpisodeTimings, TerminationReason
from slime_tau_plugin.engine.errors import (
    ContextLengthError,
    EndpointDownError,
    EnvBackendError,
    EpisodeDeadlineError,
    FailedEndpoint,
    JudgeError,
    PolicyError,
    TauPluginError,
    UserSimulatorError,
    failed_endpoint_of,
)
from slime_tau_plugin.engine.limits import StepLedger
from slime_tau_plugin.engine.policy import FinishReason, PolicyClient
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.retry import guarded_call
from slime_tau_plugin.engine.templates import ChatTemplate
from slime_tau_plugin.engine.tool_calls import ParsedAction, ToolCallParser
from slime_tau_plugin.engine.trajectory import TokenBudget, Trajectory
from slime_tau_plugin.engine.users import UserSimulator, UserTurn, make_user

logger = logging.getLogger(__name__)

T = TypeVar("T")
AbortCheck = Callable[[], bool]
"""Asked between turns: True when the trainer no longer wants this episode (slime's rollout abort)."""


@dataclass(slots=True)
class _Episode:
    """What one running episode accumulates; frozen into an :class:`EpisodeResult` at the end."""

    task: TaskRef
    t0: float = field(default_factory=time.perf_counter)
    session: EnvSession | None = None
    user: UserSimulator | None = None
    template: ChatTemplate | None = None
    parser: ToolCallParser | None = None
    trajectory: Trajectory | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    num_turns: int = 0
    counters: EpisodeCounters = EpisodeCounters()
    ledger: StepLedger = field(default_factory=StepLedger)
    """τ²'s step and error counts (``limits.py``)."""
    policy_s: float = 0.0
    env_s: float = 0.0
    user_s: float = 0.0
    net: NetStats = field(default_factory=NetStats)
    """Retries, waits and user usage (``endpoints.py``); also the episode's deadline."""
    user_info: dict[str, Any] = field(default_factory=dict)

    def result(
        self,
        termination: TerminationReason,
        env_info: dict[str, str],
        *,
        reward: float = 0.0,
        reward_info: dict[str, Any] | None = None,
        error: str | None = None,
        failed_endpoint: FailedEndpoint | None = None,
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
            error=error,
            failed_endpoint=failed_endpoint,
            env_info=env_info,
            timings=EpisodeTimings(self.policy_s, self.env_s, self.user_s, time.perf_counter() - self.t0),
            net_info={**self.net.as_metadata(), **self.user_info},
            template_mode=self.template.mode.value if self.template is not None else "",
        )


class EpisodeEngine:
    """The multi-turn loop over injected collaborators: the process's :class:`EpisodeResources` and this
    episode's policy. Cheap to build: front doors make one per episode (verl binds its per-sample policy)."""

    def __init__(self, resources: EpisodeResources, policy: PolicyClient) -> None:
        self.resources = resources
        self.policy = policy
        self.config = resources.config
        self.limits = resources.config.limits
        self.backend = resources.backend

    async def run_episode(
        self,
        ref: TaskRef,
        sampling_params: dict[str, Any],
        *,
        session_id: str | None = None,
        headers: dict[str, str] | None = None,
        should_abort: AbortCheck | None = None,
    ) -> EpisodeResult:
        """Play ``ref`` to the end and return the token-exact result. Never raises for external failures."""
        timeout = self.config.episode_timeout_s
        net = NetStats(self.config.retry_budget, None if timeout is None else time.monotonic() + timeout)
        ep = _Episode(ref, net=net, user_info=self._user_info(sampling_params.get("sampling_seed")))
        with episode_stats(net):  # the clients count retries and waits into it (a context variable per task)
            return await self._play(ep, sampling_params, session_id, headers, should_abort)

    async def _play(
        self,
        ep: _Episode,
        sampling_params: dict[str, Any],
        session_id: str | None,
        headers: dict[str, str] | None,
        should_abort: AbortCheck | None,
    ) -> EpisodeResult:
        env_info = self.backend.package_version()
        try:
            await self._start(ep, sampling_params.get("sampling_seed"))
        except EpisodeDeadlineError as exc:
            return ep.result(TerminationReason.DEADLINE, env_info, error=str(exc))
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except TauPluginError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        error = None
        try:
            termination = await self._loop(ep, sampling_params, session_id or uuid.uuid4().hex, headers, should_abort)
        except EpisodeDeadlineError as exc:
            termination, error = TerminationReason.DEADLINE, str(exc)
        except ContextLengthError as exc:
            termination, error = TerminationReason.CONTEXT_LENGTH, str(exc)
        except PolicyError as exc:
            return self._fail(ep, TerminationReason.POLICY_ERROR, exc, env_info)
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except EnvBackendError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        if termination in (TerminationReason.ABORTED, TerminationReason.DEADLINE):  # never scored: no reward work
            return ep.result(termination, env_info, error=error)
        try:
            scored = await self._score(ep, termination)
        except EpisodeDeadlineError as exc:
            return ep.result(TerminationReason.DEADLINE, env_info, error=str(exc))
        except EnvBackendError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        return ep.result(termination, env_info, reward=float(scored.reward), reward_info=scored.breakdown, error=error)

    async def _loop(
        self,
        ep: _Episode,
        sampling_params: dict[str, Any],
        rid_prefix: str,
        headers: dict[str, str] | None,
        should_abort: AbortCheck | None,
    ) -> TerminationReason:
        traj, template = ep.trajectory, ep.template
        budget = self.token_budget(sampling_params)
        eot = template.eot_ids
        for turn in range(self.config.max_turns):
            if should_abort is not None and should_abort():
                return TerminationReason.ABORTED
            if ep.net.past_deadline():
                return TerminationReason.DEADLINE
            max_new = budget.max_new_tokens(traj)
            if max_new < 1:
                return TerminationReason.BUDGET
            params = {**sampling_params, "max_new_tokens": max_new}
            t0 = time.perf_counter()
            gen = await self.policy.generate(traj.ids, params, rid=f"{rid_prefix}-{turn}", headers=headers)
            ep.policy_s += time.perf_counter() - t0
            ep.num_turns = turn + 1
            traj.add_model_turn(gen.output_ids, gen.log_probs, gen.meta_info)
            if gen.finish_reason is FinishReason.ABORT:
                return TerminationReason.ABORTED
            text = template.decode(gen.output_ids)
            ep.messages.append({"role": "assistant", "content": text})
            if gen.finish_reason is FinishReason.LENGTH:
                return TerminationReason.LENGTH
            action = ep.parser.parse(text)
            is_error = action.kind != "invalid" and self.limits.is_agent_error(action.content, bool(action.calls))
            if not (is_error and action.kind == "respond"):  # τ² refuses an empty turn before counting it
                ep.ledger.message()
            if is_error:
                return TerminationReason.AGENT_ERROR
            new_messages, done = await self._act(ep, action)
            if done is not None:
                return done
            continuation = template.continuation_ids(new_messages, ep.messages)
            if continuation is None:
                ep.counters = ep.counters.plus(template_fallbacks=1)
                continuation = template.continuation_ids_unsafe(new_messages, ep.messages)
            closing = [] if list(gen.output_ids[-len(eot) :]) == eot else eot
            ids = [*closing, *continuation]
            if not budget.fits(traj, len(ids)):
                return TerminationReason.BUDGET
            traj.add_continuation(ids)
            ep.messages.extend(new_messages)
        return TerminationReason.MAX_TURNS

    async def _act(self, ep: _Episode, action: ParsedAction) -> tuple[list[dict[str, Any]], TerminationReason | None]:
        """Carry out one parsed action; return the messages the model sees next, or a termination."""
        if action.kind == "invalid":  # answered like a tool error; τ² would count an error per call
            ep.counters = ep.counters.plus(parse_errors=1)
            ep.ledger.tool_answers(errors=max(1, action.blocks))
            return [{"role": "tool", "content": f"Error: {action.reason}"}], self._limit(ep)
        if action.kind == "respond":
            limit = self._limit(ep)  # τ² asks before the user speaks
            if limit is not None:
                return [], limit
            turn = await self._user_reply(ep, action.content)
            ep.ledger.message(1 + 2 * turn.tool_rounds)  # each user tool call: its message and its answers
            ep.ledger.errors += turn.tool_errors
            ep.counters = ep.counters.plus(user_tool_errors=turn.tool_errors)
            if turn.is_stop:  # a limit reached on the same step wins, as in τ²
                return [], self._limit(ep) or TerminationReason.USER_STOP
            return [{"role": "user", "content": turn.text}], self._limit(ep)
        messages: list[dict[str, Any]] = []
        errors = 0
        for i, call in enumerate(action.calls):
            ep.counters = ep.counters.plus(tool_calls=1)
            step = await self._env(
                ep, ep.session.step, EnvToolCall(call.name, call.arguments, f"call-{ep.num_turns}-{i}")
            )
            ep.counters = ep.counters.plus(tool_errors=int(step.is_error))
            errors += int(step.is_error)
            messages.append({"role": "tool", "name": call.name, "content": step.content})
            if step.is_done:
                ep.ledger.tool_answers(errors)
                return messages, TerminationReason.AGENT_STOP
        ep.ledger.tool_answers(errors)
        return messages, self._limit(ep)

    def _limit(self, ep: _Episode) -> TerminationReason | None:
        """τ²'s error and step limits, asked when no tool answer is pending."""
        return self.limits.reached(ep.ledger.steps, ep.ledger.errors)

    def token_budget(self, sampling_params: dict[str, Any]) -> TokenBudget:
        """Per-turn cap (the tighter of ``tau_max_tokens_per_turn`` and slime's ``max_new_tokens``), whole-sequence
        cap (``max_context_len``) and the optional whole-response cap (``tau_max_response_len``)."""
        caps = [c for c in (self.config.max_tokens_per_turn, sampling_params.get("max_new_tokens")) if c]
        per_turn = min(caps) if caps else None
        return TokenBudget(self.config.max_context_len, self.config.max_response_len, per_turn)

    async def _score(self, ep: _Episode, termination: TerminationReason) -> Any:
        """τ's reward, through the judge's guard: an NL-assertion judge that fails every request is waited
        for (``tau_outage_tolerance_s``) like any endpoint, and ``tau_judge_max_inflight`` bounds the scoring."""
        judge = self.config.judge_endpoint()
        url = judge.base_url if judge is not None else "tau-default-judge"
        guard = guard_for(
            EndpointRole.JUDGE, url, GuardSettings(self.config.judge_max_inflight, self.config.outage_tolerance_s)
        )
        try:  # one try per admission: litellm already retried tau_judge_retries times
            return await guarded_call(lambda: self._env(ep, ep.session.reward, termination), guard, JudgeError, "judge")
        except EndpointDownError as exc:
            raise JudgeError(str(exc)) from exc

    def _user_info(self, seed: int | None) -> dict[str, Any]:
        """Who played the user (an LLM user's model, temperature and per-episode seed), for every sample."""
        if self.config.user is not UserKind.LLM:
            return {"user_kind": self.config.user.value}
        return {
            "user_kind": self.config.user.value,
            "user_model": self.config.user_model,
            "user_temperature": self.config.user_temperature,
            "user_seed": seed,
        }

    # --- episode start and user turns ------------------------------------------------------------

    async def _start(self, ep: _Episode, seed: int | None) -> None:
        """Open the env, the tooling and the user; ``seed`` (the episode's ``sampling_seed``) seeds an LLM user."""
        session = ep.session = await self._env(ep, self.backend.open, ep.task, self.resources.env_options)
        ep.template, ep.parser = await self._blocking(self.resources.tooling.get, session.tools, error=EnvBackendError)
        runner = self._env_runner(EnvBackendError)
        ep.user = await self._user_call(
            ep,
            make_user(self.config, session, runner, self.resources.user_client, seed),
        )
        opening = await self._user_call(ep, ep.user.opening())
        ep.ledger.message()  # τ² counts the user's opening, not its greeting
        ep.messages = [{"role": "system", "content": session.agent_system_prompt}, {"role": "user", "content": opening}]
        await self._env(ep, session.record_message, "user", opening)
        ep.trajectory = Trajectory(await self._blocking(ep.template.prompt_ids, ep.messages, error=EnvBackendError))

    async def _user_reply(self, ep: _Episode, text: str) -> UserTurn:
        await self._env(ep, ep.session.record_message, "assistant", text)
        turn = await self._user_call(ep, ep.user.reply(text))
        if not turn.is_stop:
            await self._env(ep, ep.session.record_message, "user", turn.text)
        return turn

    async def _user_call(self, ep: _Episode, awaitable: Awaitable[T]) -> T:
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

    async def _env(self, ep: _Episode, fn: Callable[..., T], *args: Any) -> T:
        """A timed τ call off the loop (reset, step, reward); failures become EnvBackendError."""
        t0 = time.perf_counter()
        try:
            return await self._blocking(fn, *args, error=EnvBackendError)
        finally:
            ep.env_s += time.perf_counter() - t0

    def _env_runner(self, error: type[TauPluginError]) -> Callable[..., Awaitable[Any]]:
        async def run(fn, *args):
            return await self._blocking(fn, *args, error=error)

        return run

    async def _blocking(self, fn: Callable[..., T], *args: Any, error: type[TauPluginError]) -> T:
        """Run τ code off the loop; translate its failures into our error type at this seam."""
        try:
            return await run_blocking(fn, *args, timeout=self.config.env_timeout_s, workers=self.config.env_workers)
        except TauPluginError:
            raise
        except TimeoutError as exc:
            raise error(f"{getattr(fn, '__name__', fn)} timed out after {self.config.env_timeout_s}s") from exc
        except Exception as exc:
            raise error(f"{getattr(fn, '__name__', fn)} failed: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _fail(ep: _Episode, reason: TerminationReason, exc: BaseException, env_info: dict[str, str]) -> EpisodeResult:
        logger.warning("task=%s/%s episode failed: %s", ep.task.domain, ep.task.task_id, exc)
        error = f"{type(exc).__name__}: {exc}"
        return ep.result(reason, env_info, error=error, failed_endpoint=failed_endpoint_of(exc))


async def run_episode(
    resources: EpisodeResources,
    policy: PolicyClient,
    task: TaskRef,
    sampling_params: dict[str, Any],
    *,
    session_id: str | None = None,
    headers: dict[str, str] | None = None,
    should_abort: AbortCheck | None = None,
) -> EpisodeResult:
    """Play ``task`` with ``policy`` on the process's ``resources``; the typed result, never an external failure."""
    engine = EpisodeEngine(resources, policy)
    return await engine.run_episode(
        task, sampling_params, session_id=session_id, headers=headers, should_abort=should_abort
    )
