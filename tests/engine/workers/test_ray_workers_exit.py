"""Ray episode actors at the process's exit (issue 34 §7): Ray's own atexit hook shuts Ray down before the pools'
close runs, which then called ``ray.kill`` on a handle of the finished session (``ActorHandleNotFoundError``
printed as "Exception ignored in atexit callback", after Ray had been started again to run it).
"""

from __future__ import annotations

import asyncio

import pytest

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.workers.registry import close_pools, pool_for


def test_closing_ray_pools_after_ray_shut_down_is_quiet_and_starts_no_ray(qwen25_dir):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024 * 1024, logging_level="WARNING")
    config = TauConfig(
        tokenizer_path=qwen25_dir,
        policy_url="http://127.0.0.1:9",
        episode_workers=1,
        episode_worker_kind="ray",
        episode_worker_cpus=0.5,
    )
    try:
        pool = asyncio.run(pool_for(config))
        assert pool is not None and pool.slots
    finally:
        ray.shutdown()  # what Ray's atexit hook does first
    close_pools()  # then ours: no ActorHandleNotFoundError, no new Ray session
    assert not ray.is_initialized()
    assert all(not slot.alive for slot in pool.slots)
