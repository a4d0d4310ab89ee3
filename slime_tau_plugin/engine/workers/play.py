"""A played episode as the trainer stores it: :func:`finish_episode`, wherever the episode ran.

A front door plays its request through the episode's failure boundary (``loop/boundary.play_episode``: a FAILED
result for anything but a ``ConfigError``) and finishes it here: the trainable trajectory, the decoded response and
what the trainer's sample already held. The trainer's process does both directly (``tau_episode_workers: 0``);
worker processes and Ray actors do the same on their own resources (``host.py``) and send the finished episode
back, so a sample is the same wherever it was played.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.loop.blocking import run_cpu
from slime_tau_plugin.engine.loop.boundary import PlayedEpisode
from slime_tau_plugin.engine.outcome import trainable_trajectory
from slime_tau_plugin.engine.workers.messages import FinishedEpisode


async def finish_episode(played: PlayedEpisode) -> FinishedEpisode:
    """``played`` as the trainer stores it (:func:`finish`), decoded off the event loop."""
    if played.resources is None:
        return finish(played.result, None)
    return await run_cpu(finish, played.result, played.tokenizer, played.resumed)  # decoding is CPU work


def finish(result: EpisodeResult, tokenizer: Any, resumed: EpisodeState | None = None) -> FinishedEpisode:
    """``result`` as a trainer stores it: the trainable trajectory, the decoded response, what was kept."""
    traj = trainable_trajectory(result, tokenizer)
    kept = len(resumed.segments) if resumed is not None and result.trajectory is traj else 0
    text = tokenizer.decode(traj.response_ids, skip_special_tokens=False) if tokenizer is not None else ""
    return FinishedEpisode(result, traj, text, kept)
