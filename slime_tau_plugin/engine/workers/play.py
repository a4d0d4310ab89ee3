"""The one function that plays an :class:`EpisodeRequest`, wherever it runs: :func:`play_request`.

A request is what a trainer's sample asks for, as a value any process can play; :func:`play_request` plays it
through the episode's failure boundary (``loop/boundary.play_episode``: a FAILED result for anything but a
``ConfigError``) and stores the result as the trainer will (:func:`finish`). The trainer's process runs it directly
(``tau_episode_workers: 0``), worker processes and Ray actors run it on their own resources, so a sample is the
same wherever it was played.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import task_ref_from_sample
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.errors import ResumeError
from slime_tau_plugin.engine.loop.blocking import run_cpu
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.engine.loop.run import AbortCheck
from slime_tau_plugin.engine.outcome import trainable_trajectory
from slime_tau_plugin.engine.workers.messages import EpisodeRequest, FinishedEpisode, HeldTokens


async def play_request(config: TauConfig, request: EpisodeRequest, should_abort: AbortCheck | None) -> FinishedEpisode:
    """Play ``request`` on this process's resources for ``config`` with the config's policy.

    Raises:
        ConfigError: a setting is present but unusable (a tokenizer path that holds none, a parser name).
    """
    played = await play_episode(
        config,
        lambda: task_ref_from_sample(request.prompt, request.metadata, config),
        request.sampling_params,
        session_id=request.session_id,
        headers=request.headers,
        should_abort=should_abort,
        resume=lambda: resumable_state(request.state, request.held),
        suspend=request.suspend,
        group=request.group,
    )
    if played.resources is None:
        return finish(played.result, None)
    return await run_cpu(finish, played.result, played.tokenizer, played.resumed)  # decoding is CPU work


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
