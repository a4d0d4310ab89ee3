"""Episode workers as Ray actors (``tau_episode_worker_kind: ray``): slime already runs on Ray, so its cluster's
CPUs play the episodes.

``tau_episode_workers`` async actors, each ``tau_episode_worker_cpus`` CPUs, spread over the cluster's nodes
(``SPREAD``: an episode only talks HTTP to the policy router and the user simulator, so any node serves). Each
actor owns its event loop, resources and HTTP clients (an :class:`EpisodeHost`). The trainer's process awaits
Ray's object refs; an actor that dies (``RayActorError``) is replaced by the pool and its episodes played again.
Ray is imported only here, when a config asks for it: join the running cluster (``ray.init()`` inside slime's
actors is a no-op), else start a local one.
"""

from __future__ import annotations

import logging
from typing import Any

from slime_tau_plugin.engine.choices import WorkerKind
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.workers.host import EpisodeHost
from slime_tau_plugin.engine.workers.messages import EpisodeRequest, FinishedEpisode
from slime_tau_plugin.engine.workers.pools import Pending, WorkerPool, WorkerSlot

logger = logging.getLogger(__name__)

MAX_EPISODES_PER_ACTOR = 10_000
"""Ray's ``max_concurrency`` of an actor: episodes are awaits, not threads, so the bound is memory, not CPUs."""


class EpisodeActor:
    """The actor's class (wrapped by ``ray.remote`` at pool start): an :class:`EpisodeHost` behind Ray's API."""

    def __init__(self, config: Any, name: str) -> None:
        self.host = EpisodeHost(config, name)

    async def warm(self) -> dict[str, str]:
        await self.host.warm()
        return self.host.where

    async def play(self, request: EpisodeRequest) -> FinishedEpisode:
        return await self.host.play(request)

    async def abort(self, request_id: str) -> None:
        self.host.abort(request_id)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "tau_episode_worker_kind=ray needs Ray: pip install 'slime-tau-plugin[ray]' (slime's images have it)"
        ) from None
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, logging_level=logging.WARNING)
    return ray


class RaySlot(WorkerSlot):
    """One actor; answers arrive on Ray's thread through the object ref's future."""

    def __init__(self, pool: RayPool, index: int) -> None:
        super().__init__(pool, index)
        self.actor = pool.actor_class.remote(pool.config, self.name)
        self.actor.warm.remote()

    def submit(self, pending: Pending) -> None:
        rid = pending.request.request_id
        ref = self.actor.play.remote(pending.request)
        ref.future().add_done_callback(lambda fut: self._answered(rid, fut))

    def abort(self, request_id: str) -> None:
        if self.alive:
            self.actor.abort.remote(request_id)

    def close(self) -> None:
        """Kill the actor; nothing to do once Ray itself shut down (its atexit hook runs before the pools')."""
        self.alive = False
        import ray  # imported when this pool started; _ray() would start a new Ray at exit

        if not ray.is_initialized():
            return
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception as exc:  # the actor (or Ray) is already gone: there is nothing left to stop
            logger.debug("%s: kill at close: %s", self.name, exc)

    def _answered(self, request_id: str, fut: Any) -> None:
        ray = _ray()
        try:
            finished = fut.result()
        except ray.exceptions.RayActorError as exc:
            self.pool.died(self, f"Ray actor died: {str(exc).splitlines()[0][:200]}")
            return
        except ray.exceptions.RayTaskError as exc:  # raised inside play: the cause is ours (a ConfigError)
            self.pool.completed(self, request_id, error=getattr(exc, "cause", None) or exc)
            return
        except BaseException as exc:
            self.pool.completed(self, request_id, error=exc)
            return
        self.pool.completed(self, request_id, finished=finished)


class RayPool(WorkerPool):
    """``tau_episode_workers`` Ray actors of ``tau_episode_worker_cpus`` CPUs each."""

    kind = WorkerKind.RAY

    def __init__(self, config: Any) -> None:
        ray = _ray()
        self.actor_class = ray.remote(
            num_cpus=config.episode_worker_cpus,
            max_concurrency=MAX_EPISODES_PER_ACTOR,
            scheduling_strategy="SPREAD",
        )(EpisodeActor)
        super().__init__(config)

    def _start(self, index: int) -> WorkerSlot:
        return RaySlot(self, index)
