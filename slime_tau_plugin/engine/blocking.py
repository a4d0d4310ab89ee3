"""The one door through which synchronous τ code runs: a bounded thread pool with a timeout.

slime runs every rollout coroutine on one event-loop thread; a τ reset or reward that ran on it would
stall every other episode. Everything blocking goes through :func:`run_blocking`. The pools are the process
registry's (``process.py``), one per size.
"""

from __future__ import annotations

import asyncio
import contextlib
import sysconfig
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from slime_tau_plugin.engine.process import process_registry

T = TypeVar("T")


def prepare_for_threads() -> None:
    """Fill caches CPython fills without a lock, before a worker thread can race the caller to them.

    CPython 3.11's first ``sysconfig.get_config_vars()`` publishes a half-filled dict: a second thread
    calling it meanwhile (loguru's import does, and so does zoneinfo's) raises ``KeyError('userbase')``.
    """
    sysconfig.get_config_vars()


def get_pool(workers: int) -> ThreadPoolExecutor:
    """A process-wide pool per size (created once, reused across episodes and event loops)."""
    return process_registry().pools.get(workers, lambda: _new_pool(workers))


def _new_pool(workers: int) -> ThreadPoolExecutor:
    prepare_for_threads()
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tau-env")


async def run_blocking(fn: Callable[..., T], *args, timeout: float, workers: int = 8, **kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` in the pool; raise ``TimeoutError`` after ``timeout`` seconds of running.

    The timeout counts from the moment a worker thread starts the call, not from the queue: a timed-out call
    keeps its thread until it returns (Python cannot kill threads), and healthy calls queued behind a few hung
    ones must not time out for them (measured in the soak: 36 of 250 env timeouts hit calls that never hang).
    The wait for a free thread is bounded by ``timeout`` too, so a pool whose every thread hangs still errors.
    """
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    def call() -> T:
        with contextlib.suppress(RuntimeError):  # the caller's loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(started.set)
        return fn(*args, **kwargs)

    future = loop.run_in_executor(get_pool(workers), call)
    name = getattr(fn, "__name__", fn)
    try:
        await asyncio.wait_for(started.wait(), timeout)
    except asyncio.TimeoutError as exc:  # the builtin from Python 3.11 on; a class of its own on 3.10
        future.cancel()  # still queued: it never runs
        raise TimeoutError(f"{name} waited {timeout}s for a free τ worker thread (tau_env_workers={workers})") from exc
    try:
        return await asyncio.wait_for(future, timeout)
    except asyncio.TimeoutError as exc:
        raise TimeoutError(f"{name} timed out after {timeout}s") from exc
