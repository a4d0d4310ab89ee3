"""The failure boundary of an episode: :func:`play_episode` turns a task, a config and a policy into a finished
episode or a FAILED result, and nothing else leaves it but a ``ConfigError``.

Every front door calls it with the one value it wrote, an :class:`EpisodeRequest`: slime's ``generate`` and the CLI
(``play_sample``, in slime's process, or in a worker process or a Ray actor: ``workers/host.py``), TRL's
``rollout_func``, NeMo Gym's ``/run`` and verl's agent loop (with its own policy, tokenizer and task lookup). It hands
the request's options to :meth:`EpisodeEngine.play` as they are, the suspended state loaded. So one place decides
what a failure becomes:

- a required setting that is absent (``MissingSettingError``: no policy URL, no tokenizer) -> FAILED, logged once
  per process; every sample would fail the same way, and the trainer's run shows it in its failure metrics;
- a present but unusable setting (``ConfigError``: a tokenizer path that holds none, a parser name) -> raised:
  the run must stop with the one line that names the key;
- the shared resources failing to build for any other reason -> FAILED, logged with its traceback;
- a task the sample cannot name, a suspended state that no longer fits (``ResumeError``), any error before the
  episode starts -> FAILED with the reason; the episode itself never raises for an external failure
  (:meth:`~slime_tau_plugin.engine.loop.run.EpisodeEngine.play`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import require_benchmark, task_ref_from_sample
from slime_tau_plugin.engine.episode.request import EpisodeRequest
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.errors import ConfigError, MissingSettingError, ResumeError
from slime_tau_plugin.engine.loop.run import EpisodeEngine
from slime_tau_plugin.engine.outcome import failed_result
from slime_tau_plugin.engine.policy.client import PolicyClient, require_policy_url
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.shared import shared_state

logger = logging.getLogger(__name__)

TaskLookup = Callable[[], TaskRef]
"""How a front door names its task when the request's prompt and metadata do not (a verl row's ``extra_info``):
run inside the boundary, so a sample that names no task is a FAILED result, not an exception."""


@dataclass(frozen=True, slots=True)
class PlayedEpisode:
    """What :func:`play_episode` hands back: the result, and what the front door needs to store it."""

    result: EpisodeResult
    resources: EpisodeResources | None
    """The process's resources for the config (None: they could not be built, and ``result`` is FAILED)."""
    resumed: EpisodeState | None = None
    """The suspended state the episode resumed from (its kept turns are the sample's already)."""

    @property
    def tokenizer(self) -> Any:
        return self.resources.tokenizer if self.resources is not None else None


async def play_episode(
    config: TauConfig,
    request: EpisodeRequest,
    *,
    task: TaskLookup | None = None,
    policy: PolicyClient | None = None,
    tokenizer: Any = None,
) -> PlayedEpisode:
    """Play the episode ``request`` asks for with ``policy`` (None: the config's own, ``tau_policy_url``) on this
    process's resources for ``config`` (built with the trainer's ``tokenizer`` when it brings one).

    The task is the one the request's prompt and metadata name (``data.task_ref_from_sample``), or ``task()`` for a
    door whose rows name it their own way (verl's ``extra_info``). A stored suspended state (``options.resume``) is
    read and checked here, so one that no longer fits is a FAILED result.

    Raises:
        ConfigError: a setting is present but unusable (never a ``MissingSettingError``: that is a FAILED result).
    """
    options = request.options
    try:
        if policy is None:
            require_policy_url(config)
        resources = await EpisodeResources.for_config(config, tokenizer=tokenizer)
    except MissingSettingError as exc:
        if shared_state().first_time("episode: missing setting", str(exc)):
            logger.error("slime-tau-plugin cannot run episodes, every sample is FAILED: %s", exc)
        return PlayedEpisode(failed_result(config, exc), None)
    except ConfigError:
        raise
    except Exception as exc:  # the failure boundary: an unexpected build failure is a FAILED result too
        logger.exception("slime-tau-plugin could not build its resources for %r", config)
        return PlayedEpisode(failed_result(config, exc), None)
    try:
        ref = task() if task is not None else task_ref_from_sample(request.prompt, request.metadata, config)
    except Exception as exc:  # the failure boundary: a sample that names no task is a FAILED result
        logger.exception("episode (session %s) names no task it can play", options.session_id)
        return PlayedEpisode(failed_result(config, exc), resources)
    require_benchmark(ref.benchmark, config, f"the sample ({ref.domain}/{ref.split}/{ref.task_id})")
    state = None
    try:
        state = options.state()
        engine = EpisodeEngine(resources, policy if policy is not None else resources.policy)
        # a trainer may share one sampling dict across samples: the engine plays its own copy
        result = await engine.play(ref, dict(request.sampling_params), replace(options, resume=state))
    except ResumeError as exc:
        result = failed_result(config, exc, state.task_ref if state is not None else None)
    except Exception as exc:  # the failure boundary: nothing reaches the trainer
        logger.exception("episode (session %s) failed before it started", options.session_id)
        result = failed_result(config, exc)
    return PlayedEpisode(result, resources, state)
