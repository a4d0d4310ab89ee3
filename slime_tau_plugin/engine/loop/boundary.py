"""The failure boundary of an episode: :func:`play_episode` turns a task, a config and a policy into a finished
episode or a FAILED result, and nothing else leaves it but a ``ConfigError``.

Every front door calls it: slime's ``generate`` (through ``workers/play.play_request``, in slime's process, a worker
process or a Ray actor), the CLI (the same path) and verl's agent loop (with its own policy and tokenizer). So one
place decides what a failure becomes:

- a required setting that is absent (``MissingSettingError``: no policy URL, no tokenizer) -> FAILED, logged once
  per process; every sample would fail the same way, and the trainer's run shows it in its failure metrics;
- a present but unusable setting (``ConfigError``: a tokenizer path that holds none, a parser name) -> raised:
  the run must stop with the one line that names the key;
- the shared resources failing to build for any other reason -> FAILED, logged with its traceback;
- a task the sample cannot name, a suspended state that no longer fits (``ResumeError``), any error before the
  episode starts -> FAILED with the reason; the episode itself never raises for an external failure
  (:func:`~slime_tau_plugin.engine.loop.run.run_episode`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import require_benchmark
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.errors import ConfigError, MissingSettingError, ResumeError
from slime_tau_plugin.engine.loop.run import AbortCheck, run_episode
from slime_tau_plugin.engine.outcome import failed_result
from slime_tau_plugin.engine.policy.client import PolicyClient, require_policy_url
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.shared import shared_state

logger = logging.getLogger(__name__)

TaskLookup = Callable[[], TaskRef]
"""How the front door names its task (a row's metadata read with the config): run inside the boundary, so a
sample that names no task is a FAILED result, not an exception."""
StateLookup = Callable[[], "EpisodeState | None"]
"""The suspended episode to resume, read and checked inside the boundary (``ResumeError`` -> FAILED)."""


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
    task: TaskLookup,
    sampling_params: dict[str, Any],
    *,
    policy: PolicyClient | None = None,
    tokenizer: Any = None,
    session_id: str | None = None,
    headers: dict[str, str] | None = None,
    should_abort: AbortCheck | None = None,
    resume: StateLookup | None = None,
    suspend: bool = False,
    group: str | None = None,
) -> PlayedEpisode:
    """Play the task ``task()`` names with ``policy`` (None: the config's own, ``tau_policy_url``) on this process's
    resources for ``config`` (built with the trainer's ``tokenizer`` when it brings one). ``group``: the trainer's
    GRPO group of the sample in training (the customer's opening is shared within it: ``tau_user_shared_opening``).

    Raises:
        ConfigError: a setting is present but unusable (never a ``MissingSettingError``: that is a FAILED result).
    """
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
        ref = task()
    except Exception as exc:  # the failure boundary: a sample that names no task is a FAILED result
        logger.exception("episode (session %s) names no task it can play", session_id)
        return PlayedEpisode(failed_result(config, exc), resources)
    require_benchmark(ref.benchmark, config, f"the sample ({ref.domain}/{ref.split}/{ref.task_id})")
    state = None
    try:
        state = resume() if resume is not None else None
        result = await run_episode(
            resources,
            policy if policy is not None else resources.policy,
            ref,
            dict(sampling_params),  # a trainer may share one dict across samples
            session_id=session_id,
            headers=headers,
            should_abort=should_abort,
            resume=state,
            suspend=suspend,
            group=group,
        )
    except ResumeError as exc:
        result = failed_result(config, exc, state.task_ref if state is not None else None)
    except Exception as exc:  # the failure boundary: nothing reaches the trainer
        logger.exception("episode (session %s) failed before it started", session_id)
        result = failed_result(config, exc)
    return PlayedEpisode(result, resources, state)
