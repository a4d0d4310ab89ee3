"""What a worker process or a Ray actor holds: :class:`EpisodeHost`, the episodes it plays for one config.

The host owns nothing but the abort flags of its episodes: resources (tokenizer, τ, HTTP clients) are the
process's, built once by ``EpisodeResources.for_config`` on the host's own event loop. An abort the trainer's
process forwards (:meth:`EpisodeHost.abort`) is seen by the episode between turns, as slime's own abort is seen
in-process; one that arrives before its episode is harmless (the flag waits for it).
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
from dataclasses import replace

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.workers.messages import EpisodeRequest, FinishedEpisode
from slime_tau_plugin.engine.workers.play import finish_episode

logger = logging.getLogger(__name__)


class EpisodeHost:
    """Plays requests for one config in this process; the trainer's process forwards aborts by request id."""

    def __init__(self, config: TauConfig, name: str) -> None:
        self.config = config
        self.name = name
        self.where = {"tau_worker": f"{name} pid {os.getpid()} on {socket.gethostname()}"}
        self._aborted: set[str] = set()

    async def warm(self) -> None:
        """Build the resources before the first request (a failure is left for the first episode to report)."""
        try:
            await EpisodeResources.for_config(self.config)
        except Exception as exc:  # the first episode reports it as its FAILED reason, or raises a ConfigError
            logger.warning("%s: resources not ready: %s", self.name, exc)

    async def play(self, request: EpisodeRequest) -> FinishedEpisode:
        """Play one request through the failure boundary (a ConfigError is raised to the caller), asked between
        turns by this host's abort flag for it (the request arrives without the trainer's check)."""
        rid = request.request_id
        try:
            played = await play_episode(self.config, request.with_abort(lambda: rid in self._aborted))
            finished = await finish_episode(played)
            return replace(finished, worker=dict(self.where))
        finally:
            self._aborted.discard(rid)

    def abort(self, request_id: str) -> None:
        self._aborted.add(request_id)


def portable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its text (the trainer's process re-raises it)."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
