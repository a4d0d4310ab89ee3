"""The process's episode-worker pools, one per config: :func:`pool_for` starts the config's transport on first use.

Kept apart from ``pools.py`` so the pool base knows no transport: ``process_pool.py`` and ``ray_actors.py`` build on the
base, and only this module names them (Ray is imported only when a config asks for it).
"""

from __future__ import annotations

import atexit

from slime_tau_plugin.engine.choices import WorkerKind
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.shared import SharedMap, shared_state
from slime_tau_plugin.engine.workers.pools import WorkerPool


class _Pools:
    """The process's pools by config; closed at exit so no worker outlives its trainer."""

    def __init__(self) -> None:
        self.by_config: SharedMap[WorkerPool] = SharedMap("episode worker pools")
        self.made: list[WorkerPool] = []
        atexit.register(self.close_all)

    def close_all(self) -> None:
        for pool in self.made:
            pool.close()
        self.made.clear()
        self.by_config = SharedMap("episode worker pools")


def close_pools() -> None:
    """Stop every worker of this process's pools (a script's run is over; the next use starts new ones)."""
    shared_state().part(_Pools).close_all()


async def pool_for(config: TauConfig) -> WorkerPool | None:
    """The pool that plays ``config``'s episodes, started on first use (off the loop: Ray may have to connect);
    None to play them in this process."""
    if config.episode_workers == 0:
        return None
    pools = shared_state().part(_Pools)

    def start() -> WorkerPool:
        if config.episode_worker_kind is WorkerKind.RAY:
            from slime_tau_plugin.engine.workers.ray_actors import RayPool

            pool: WorkerPool = RayPool(config)
        else:
            from slime_tau_plugin.engine.workers.process_pool import ProcessPool

            pool = ProcessPool(config)
        pools.made.append(pool)
        return pool

    return await pools.by_config.aget(config, start)
