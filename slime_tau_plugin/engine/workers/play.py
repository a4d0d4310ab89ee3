"""The one function that plays an :class:`EpisodeRequest`, wherever it runs: :func:`play_request`.

It is the failure boundary of an episode: a required setting that is absent, a task the sample cannot name, a
suspended state that no longer fits and any unexpected error before the episode starts each become a FAILED
result with the reason; only a ``ConfigError`` (a present but unusable setting: every sample would fail) is raised.
The trainer's process runs it directly (``tau_episode_workers: 0``), worker processes and Ray actors run it on
their own resources, so a sample is the same wherever it was played.
"""

from __future__ import annotations

import logging
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import task_ref_from_sample
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.errors import ConfigError, MissingSettingError, ResumeError
from slime_tau_plugin.engine.loop.blocking import run_cpu
from slime_tau_plugin.engine.loop.run import AbortCheck, run_episode
from slime_tau_plugin.engine.outcome import failed_result, trainable_trajectory
from slime_tau_plugin.engine.policy.client import require_policy_url
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.engine.workers.messages import EpisodeRequest, FinishedEpisode, HeldTokens

logger = logging.getLogger(__name__)


async def play_request(config: TauConfig, request: EpisodeRequest, should_abort: AbortCheck | None) -> FinishedEpisode:
    """Play ``request`` on this process's resources for ``config``.

    Raises:
        ConfigError: a setting is present but unusable (a tokenizer path that holds none, a parser name).
    """
    try:
        require_policy_url(config)
        resources = await EpisodeResources.for_config(config)
    except MissingSettingError as exc:
        if shared_state().first_time("generate: missing setting", str(exc)):
            logger.error("slime-tau-plugin cannot run episodes, every sample is FAILED: %s", exc)
        return finish(failed_result(config, exc), None)
    except ConfigError:
        raise
    except Exception as exc:  # the failure boundary: an unexpected build failure is a FAILED sample too
        logger.exception("slime-tau-plugin could not build its resources for %r", config)
        return finish(failed_result(config, exc), None)
    state = None
    try:
        ref = task_ref_from_sample(request.prompt, request.metadata, config)
        state = resumable_state(request.state, request.held)
        result = await run_episode(
            resources,
            resources.policy,
            ref,
            dict(request.sampling_params),  # slime shares one dict across eval samples
            session_id=request.session_id,
            headers=request.headers,
            should_abort=should_abort,
            resume=state,
            suspend=request.suspend,
        )
    except ResumeError as exc:
        result = failed_result(config, exc, state.task_ref if state is not None else None)
    except Exception as exc:  # the failure boundary: nothing reaches the trainer
        logger.exception("episode for request %s failed before it started", request.request_id)
        result = failed_result(config, exc)
    return await run_cpu(finish, result, resources.tokenizer, state)  # decoding a long response is CPU work


def resumable_state(data: dict[str, Any] | None, held: HeldTokens | None) -> EpisodeState | None:
    """The suspended episode ``data`` describes, checked against the tokens the trainer's sample holds.

    Raises:
        ResumeError: the state is malformed, or the sample no longer holds the tokens it names.
    """
    if data is None:
        return None
    state = EpisodeState.from_json(data)
    if held is not None:
        stored = HeldTokens.of([*state.prompt_ids, *(t for seg in state.segments for t in seg.ids)])
        if stored != held:
            raise ResumeError(
                f"resume: the sample holds {held.count} tokens, not the {stored.count} its suspended episode left "
                "(something rewrote sample.tokens between steps)"
            )
    return state


def finish(result: EpisodeResult, tokenizer: Any, resumed: EpisodeState | None = None) -> FinishedEpisode:
    """``result`` as a trainer stores it: the trainable trajectory, the decoded response, what was kept."""
    traj = trainable_trajectory(result, tokenizer)
    kept = len(resumed.segments) if resumed is not None and result.trajectory is traj else 0
    text = tokenizer.decode(traj.response_ids, skip_special_tokens=False) if tokenizer is not None else ""
    return FinishedEpisode(result, traj, text, kept)
