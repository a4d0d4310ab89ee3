"""The episode engine: :class:`EpisodeEngine` plays one τ task against an injected policy.

generate -> parse -> act -> continue, until a :class:`TerminationReason`; τ's own ending rules
(``limits.py``: τ²'s error and step limits, its agent-error rule) are asked where τ asks them. Every id
the policy sampled is kept unchanged (mask 1) and every continuation comes from the chat template (mask 0): see
``trajectory.py`` and ``templates.py``. τ calls go through ``live_episode.EpisodeCalls``. An episode the
trainer aborts can leave a resumable state (``suspend``) and go on from one later (``resume``:
``episode_start.py``). The engine takes what the
process shares (``resources.EpisodeResources``) and this episode's policy; it never imports slime or
verl, and never picks a policy class itself. Front doors call :func:`run_episode`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.blocking import run_cpu
from slime_tau_plugin.engine.choices import UserKind
from slime_tau_plugin.engine.endpoints import EndpointRole, GuardSettings
from slime_tau_plugin.engine.envs import EnvToolCall, TaskRef
from slime_tau_plugin.engine.episode import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode_start import open_fresh
from slime_tau_plugin.engine.episode_start import resume as resume_episode
from slime_tau_plugin.engine.episode_state import EpisodeState
from slime_tau_plugin.engine.errors import (
    ContextLengthError,
    EndpointDownError,
    EnvBackendError,
    EpisodeDeadlineError,
    JudgeError,
    PolicyError,
    TauPluginError,
    UserSimulatorError,
    UserTokenBudgetError,
    failed_endpoint_of,
)
from slime_tau_plugin.engine.live_episode import EpisodeCalls, LiveEpisode
from slime_tau_plugin.engine.net_stats import NetStats, episode_stats
from slime_tau_plugin.engine.policy import FinishReason, PolicyClient
from slime_tau_plugin.engine.replicas import ReplicaSet, on_replica
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.retry import guarded_on_replicas
from slime_tau_plugin.engine.review.outcome import review_episode
from slime_tau_plugin.engine.review.settings import ReviewSettings
from slime_tau_plugin.engine.tool_calls import ParsedAction
from slime_tau_plugin.engine.trajectory import TokenBudget
from slime_tau_plugin.engine.users import UserTurn

logger = logging.getLogger(__name__)

Ending = TerminationReason | None
EnvInfo = dict[str, str]
AbortCheck = Callable[[], bool]
"""Asked between turns: True when the trainer no longer wants this episode (slime's rollout abort)."""


@dataclass(frozen=True, slots=True)
class _Run:
    """How one call of ``run_episode`` plays: request ids, routing headers, abort check, resume and suspend."""

    rid_prefix: str
    headers: dict[str, str] | None
    should_abort: AbortCheck | None
    resume: EpisodeState | None
    suspend: bool


class EpisodeEngine:
    """The multi-turn loop over injected collaborators: the process's :class:`EpisodeResources` and this
    episode's policy. Cheap to build: front doors make one per episode (verl binds its per-sample policy)."""

    def __init__(self, resources: EpisodeResources, policy: PolicyClient) -> None:
        self.resources = resources
        self.policy = policy
        self.config = resources.config
        self.limits = resources.config.limits
        self.backend = resources.backend
        self.calls = EpisodeCalls(self.config.env_timeout_s, self.config.env_workers)
        self.review = ReviewSettings.from_config(self.config)

    async def run_episode(
        self,
        ref: TaskRef,
        sampling_params: dict[str, Any],
        *,
        session_id: str | None = None,
        headers: dict[str, str] | None = None,
        should_abort: AbortCheck | None = None,
        resume: EpisodeState | None = None,
        suspend: bool = False,
    ) -> EpisodeResult:
        """Play ``ref`` to the end and return the token-exact result. Never raises for external failures.

        ``resume``: go on from a suspended episode's state instead of starting (``ref`` is the state's task).
        ``suspend``: an episode the trainer aborts returns its resumable state in ``EpisodeResult.state``.
        """
        timeout = self.config.episode_timeout_s
        played = resume.active_s if resume is not None else 0.0
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout - played)
        net = NetStats(self.config.retry_budget, deadline)
        task = resume.task_ref if resume is not None else ref
        ep = LiveEpisode(task, net=net, user_info=self._user_info(sampling_params.get("sampling_seed")))
        run = _Run(session_id or uuid.uuid4().hex, headers, should_abort, resume, suspend)
        with episode_stats(net):  # the clients count retries and waits into it (a context variable per task)
            return await self._play(ep, sampling_params, run)

    async def _play(self, ep: LiveEpisode, sampling_params: dict[str, Any], run: _Run) -> EpisodeResult:
        env_info = self.backend.package_version()
        seed = sampling_params.get("sampling_seed")
        try:
            if run.resume is None:
                await open_fresh(self.calls, self.resources, ep, seed)
            else:
                await resume_episode(self.calls, self.resources, ep, run.resume, seed)
        except EpisodeDeadlineError as exc:
            return ep.result(TerminationReason.DEADLINE, env_info, error=str(exc))
        except UserTokenBudgetError as exc:
            return ep.result(TerminationReason.USER_TOKEN_BUDGET, env_info, error=str(exc))
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except TauPluginError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        error = None
        try:
            termination = ep.ended or await self._loop(ep, sampling_params, run)
        except EpisodeDeadlineError as exc:
            termination, error = TerminationReason.DEADLINE, str(exc)
        except ContextLengthError as exc:
            termination, error = TerminationReason.CONTEXT_LENGTH, str(exc)
        except UserTokenBudgetError as exc:
            termination, error = TerminationReason.USER_TOKEN_BUDGET, str(exc)
        except PolicyError as exc:
            return self._fail(ep, TerminationReason.POLICY_ERROR, exc, env_info)
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except EnvBackendError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        if termination is TerminationReason.ABORTED:  # never scored: suspended when asked, else thrown away
            state = await self._suspend(ep) if run.suspend else None
            return ep.result(termination, env_info, error=error, state=state)
        if termination.is_cut_off:  # the deadline or the user's token budget: never scored
            return ep.result(termination, env_info, error=error)
        try:
            scored = await self._score(ep, termination)
        except EpisodeDeadlineError as exc:
            return ep.result(TerminationReason.DEADLINE, env_info, error=str(exc))
        except EnvBackendError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        result = ep.result(
            termination, env_info, reward=float(scored.reward), reward_info=scored.breakdown, error=error
        )
        judge = self.resources.review_judge  # a customer error that decided it: user_error (review/)
        return await review_episode(ep, result, self.review, judge, key=f"{ep.task.task_id}:{run.rid_prefix}")

    async def _loop(self, ep: LiveEpisode, sampling_params: dict[str, Any], run: _Run) -> TerminationReason:
        """Generate, parse, act until an ending. A turn cut mid-generation (``ep.open_turn``, after an abort and
        a resume) goes on from the ids it had: its next request continues it, and it counts once."""
        traj, template = ep.trajectory, ep.template
        budget = self.token_budget(sampling_params)
        eot = template.eot_ids
        turn = ep.num_turns - 1 if ep.open_turn else ep.num_turns
        while turn < self.config.max_turns:
            if run.should_abort is not None and run.should_abort():
                return TerminationReason.ABORTED
            if ep.net.past_deadline():
                return TerminationReason.DEADLINE
            max_new = budget.max_new_tokens(traj, used_this_turn=len(ep.open_turn))
            if max_new < 1:
                return TerminationReason.BUDGET if not ep.open_turn else TerminationReason.LENGTH
            params = {**sampling_params, "max_new_tokens": max_new}
            t0 = time.perf_counter()
            gen = await self.policy.generate(traj.ids, params, rid=f"{run.rid_prefix}-{turn}", headers=run.headers)
            ep.policy_s += time.perf_counter() - t0
            traj.add_model_turn(gen.output_ids, gen.log_probs, gen.meta_info)
            ep.open_turn.extend(gen.output_ids)
            ep.num_turns = turn + 1 if ep.open_turn else turn
            if gen.finish_reason is FinishReason.ABORT:
                return TerminationReason.ABORTED
            output, ep.open_turn = ep.open_turn, []
            text = template.decode(output)
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
            continuation, fell_back = await run_cpu(template.next_ids, new_messages, ep.messages)  # off the loop
            if fell_back:
                ep.counters = ep.counters.plus(template_fallbacks=1)
            closing = [] if list(output[-len(eot) :]) == eot else eot
            ids = [*closing, *continuation]
            if not budget.fits(traj, len(ids)):
                return TerminationReason.BUDGET
            traj.add_continuation(ids)
            ep.messages.extend(new_messages)
            turn += 1
        return TerminationReason.MAX_TURNS

    async def _act(
        self, ep: LiveEpisode, action: ParsedAction
    ) -> tuple[list[dict[str, Any]], TerminationReason | None]:
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
            ep.count_user_turn(turn)
            if turn.is_stop:  # a limit reached on the same step wins, as in τ²
                return [], self._limit(ep) or TerminationReason.USER_STOP
            return [{"role": "user", "content": turn.text}], self._limit(ep)
        messages: list[dict[str, Any]] = []
        errors = 0
        for i, call in enumerate(action.calls):
            ep.counters = ep.counters.plus(tool_calls=1)
            step = await self.calls.env(
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

    def _limit(self, ep: LiveEpisode) -> TerminationReason | None:
        """τ²'s error and step limits, asked when no tool answer is pending."""
        return self.limits.reached(ep.ledger.steps, ep.ledger.errors)

    def token_budget(self, sampling_params: dict[str, Any]) -> TokenBudget:
        """Per-turn cap (the tighter of ``tau_max_tokens_per_turn`` and slime's ``max_new_tokens``), whole-sequence
        cap (``max_context_len``) and the optional whole-response cap (``tau_max_response_len``)."""
        caps = [c for c in (self.config.max_tokens_per_turn, sampling_params.get("max_new_tokens")) if c]
        per_turn = min(caps) if caps else None
        return TokenBudget(self.config.max_context_len, self.config.max_response_len, per_turn)

    async def _score(self, ep: LiveEpisode, termination: TerminationReason) -> Any:
        """τ's reward, through the judge's guards: an NL-assertion judge that fails every request is waited
        for (``tau_outage_tolerance_s``) like any endpoint, ``tau_judge_max_inflight`` bounds the scoring, and
        several judge URLs are replicas (``replicas.py``)."""
        judge = self.config.judge_endpoint()
        urls = judge.urls if judge is not None else ("tau-default-judge",)
        settings = GuardSettings(self.config.judge_max_inflight, self.config.outage_tolerance_s)
        replicas = ReplicaSet.for_urls(EndpointRole.JUDGE, urls, settings)

        def score(guard: Any) -> Any:  # the judge replica reaches τ's litellm call in the worker thread
            reward = ep.session.reward if judge is None else on_replica(guard.url, ep.session.reward)
            return self.calls.env(ep, reward, termination)

        try:  # one try per admission: litellm already retried tau_judge_retries times
            return await guarded_on_replicas(score, replicas, JudgeError, "judge")
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

    # --- user turns -------------------------------------------------------------------------------

    async def _user_reply(self, ep: LiveEpisode, text: str) -> UserTurn:
        await self.calls.env(ep, ep.session.record_message, "assistant", text)
        turn = await self.calls.user(ep, ep.user.reply(text))
        if not turn.is_stop:
            await self.calls.env(ep, ep.session.record_message, "user", turn.text)
        return turn

    async def _suspend(self, ep: LiveEpisode) -> EpisodeState | None:
        """The state an ABORTED episode resumes from; None when it cannot be taken (it then restarts)."""
        if ep.trajectory is None or ep.session is None:
            return None
        try:
            return ep.to_state(await self.calls.env(ep, ep.session.state_hash))
        except (TauPluginError, NotImplementedError) as exc:
            logger.warning("task=%s could not be suspended, it will restart: %s", ep.task, exc)
            return None

    @staticmethod
    def _fail(
        ep: LiveEpisode, reason: TerminationReason, exc: BaseException, env_info: dict[str, str]
    ) -> EpisodeResult:
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
    resume: EpisodeState | None = None,
    suspend: bool = False,
) -> EpisodeResult:
    """Play ``task`` with ``policy`` on the process's ``resources``; the typed result, never an external failure.

    ``resume``/``suspend``: see :meth:`EpisodeEngine.run_episode` (slime's partial rollout uses both).
    """
    engine = EpisodeEngine(resources, policy)
    return await engine.run_episode(
        task,
        sampling_params,
        session_id=session_id,
        headers=headers,
        should_abort=should_abort,
        resume=resume,
        suspend=suspend,
    )
