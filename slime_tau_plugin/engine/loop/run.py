"""The episode engine: :class:`EpisodeEngine` plays one τ task against an injected policy.

Read top to bottom: open the episode (fresh, or resumed from a suspended state: ``loop/start.py``), play its
turns (``loop/turns.py``: :class:`~.turns.TurnState` generating -> parsing -> acting -> continuing, until a
:class:`TerminationReason`), then turn the ending into the result: an error ladder that names each failure,
a suspended state for an aborted episode that asked for one, τ's reward for a scored one. τ calls go through
``loop/blocking.EpisodeCalls``. The engine takes what the process shares (``resources.EpisodeResources``) and this
episode's policy; it never imports slime or verl, and never picks a policy class itself. Front doors reach
:meth:`EpisodeEngine.play` through the failure boundary (``loop/boundary.play_episode``) with the request's
:class:`~slime_tau_plugin.engine.episode.request.EpisodeOptions`; :func:`run_episode` is the library's call.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace
from typing import Any

from slime_tau_plugin.engine.choices import UserKind
from slime_tau_plugin.engine.config.review_settings import ReviewSettings
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.request import AbortCheck, EpisodeOptions
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState
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
from slime_tau_plugin.engine.loop.blocking import EpisodeCalls
from slime_tau_plugin.engine.loop.live import LiveEpisode
from slime_tau_plugin.engine.loop.review import review_episode
from slime_tau_plugin.engine.loop.start import open_fresh
from slime_tau_plugin.engine.loop.start import resume as resume_episode
from slime_tau_plugin.engine.loop.turns import TurnLoop
from slime_tau_plugin.engine.net.endpoints import EndpointRole, GuardSettings
from slime_tau_plugin.engine.net.replicas import ReplicaSet, on_replica
from slime_tau_plugin.engine.net.retry import guarded_on_replicas
from slime_tau_plugin.engine.net.stats import NetStats, episode_stats
from slime_tau_plugin.engine.policy.client import PolicyClient
from slime_tau_plugin.engine.resources import EpisodeResources

__all__ = ["AbortCheck", "EpisodeEngine", "run_episode"]

logger = logging.getLogger(__name__)

EnvInfo = dict[str, str]


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

    async def play(self, task: TaskRef, sampling_params: dict[str, Any], options: EpisodeOptions) -> EpisodeResult:
        """Play ``task`` to the end and return the token-exact result. Never raises for external failures.

        Opens the episode (fresh, or from ``options.resume``: ``task`` is then the state's), plays its turns, and
        turns the ending into the result: a suspended state for an aborted episode when ``options.suspend``, τ's
        reward and the review for a scored one.

        Raises:
            ResumeError: ``options.resume`` is a stored state that cannot be read (the boundary loads it first).
        """
        ep = self._live(task, sampling_params, options)
        with episode_stats(ep.net):  # the clients count retries and waits into it (a context variable per task)
            env_info = self.backend.package_version()
            failed = await self._open(ep, env_info)
            if failed is not None:
                return failed
            error = None
            try:
                termination = ep.ended or await TurnLoop(self.policy, self.config, self.calls).play(ep)
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
            return await self._ending(ep, termination, error, env_info)

    async def run_episode(self, ref: TaskRef, sampling_params: dict[str, Any], **options: Any) -> EpisodeResult:
        """The published call (``TrainableAgentMixin.run_episode``): :meth:`play` with ``options`` the fields of
        :class:`EpisodeOptions` (``session_id``, ``should_abort``, ``resume`` ...)."""
        return await self.play(ref, sampling_params, EpisodeOptions(**options))

    def _live(self, task: TaskRef, sampling_params: dict[str, Any], options: EpisodeOptions) -> LiveEpisode:
        """The episode's state before it opens: its task, options and clock (a resumed episode's deadline counts
        the time it already played)."""
        resume = options.state()
        options = replace(options, resume=resume)
        timeout = self.config.episode_timeout_s
        played = resume.active_s if resume is not None else 0.0
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout - played)
        return LiveEpisode(
            resume.task_ref if resume is not None else task,
            sampling_params,
            options,
            options.session_id or uuid.uuid4().hex,
            net=NetStats(self.config.retry_budget, deadline),
            user_info=self._user_info(sampling_params.get("sampling_seed")),
        )

    async def _open(self, ep: LiveEpisode, env_info: EnvInfo) -> EpisodeResult | None:
        """Open the episode fresh or from its state; the result when it cannot begin, else None."""
        try:
            if ep.options.resume is None:
                await open_fresh(self.calls, self.resources, ep)
            else:
                await resume_episode(self.calls, self.resources, ep)
        except EpisodeDeadlineError as exc:
            return ep.result(TerminationReason.DEADLINE, env_info, error=str(exc))
        except UserTokenBudgetError as exc:
            return ep.result(TerminationReason.USER_TOKEN_BUDGET, env_info, error=str(exc))
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except TauPluginError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        return None

    async def _ending(
        self, ep: LiveEpisode, termination: TerminationReason, error: str | None, env_info: EnvInfo
    ) -> EpisodeResult:
        """The result of an episode whose turns ended: suspended, cut off, or scored and reviewed."""
        if termination is TerminationReason.ABORTED:  # never scored: suspended when asked, else thrown away
            state = await self._suspend(ep) if ep.options.suspend else None
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
        return await review_episode(ep, result, self.review, judge, key=f"{ep.task.task_id}:{ep.rid_prefix}")

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
    resources: EpisodeResources, policy: PolicyClient, task: TaskRef, sampling_params: dict[str, Any], **options: Any
) -> EpisodeResult:
    """Play ``task`` with ``policy`` on the process's ``resources``; the typed result, never an external failure.

    ``options``: the fields of :class:`EpisodeOptions` (``session_id``, ``headers``, ``should_abort``, ``resume``,
    ``suspend``, ``group``; slime's partial rollout uses ``resume`` and ``suspend``). The library's call; front
    doors go through the failure boundary (``loop/boundary.play_episode``).
    """
    return await EpisodeEngine(resources, policy).play(task, sampling_params, EpisodeOptions(**options))
