"""The doors through which synchronous work leaves the event loop: τ code (:func:`run_blocking`: a bounded
pool with a timeout), the plugin's own CPU work (:func:`run_cpu`: template rendering and tokenizing), and an
episode's calls to τ and the user simulator (:class:`EpisodeCalls`: timed into the episode, their failures turned
into the package's error types at this one seam).

slime runs every rollout coroutine on one event-loop thread; a τ reset or reward, or a chat template rendered,
that ran on it would stall every other episode. A worker thread does not free the GIL for Python code, but the
loop gets it back at every switch interval (5 ms) instead of after the whole call, and the Rust tokenizer
releases it while it encodes (``token_encoder.py``). The pools are the shared state's (``shared.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sysconfig
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from slime_tau_plugin.engine.errors import EnvBackendError, TauPluginError, UserSimulatorError
from slime_tau_plugin.engine.shared import shared_state

if TYPE_CHECKING:
    from slime_tau_plugin.engine.loop.live import LiveEpisode

T = TypeVar("T")


def prepare_for_threads() -> None:
    """Fill caches CPython fills without a lock, before a worker thread can race the caller to them.

    CPython 3.11's first ``sysconfig.get_config_vars()`` publishes a half-filled dict: a second thread
    calling it meanwhile (loguru's import does, and so does zoneinfo's) raises ``KeyError('userbase')``.
    """
    sysconfig.get_config_vars()


CPU_WORKERS = 2
"""Threads of :func:`run_cpu`'s pool: its work holds the GIL but for tokenizing, so more would only queue."""


def get_pool(workers: int, name: str = "tau-env") -> ThreadPoolExecutor:
    """A process-wide pool per name and size (created once, reused across episodes and event loops)."""
    key = workers if name == "tau-env" else (name, workers)
    return shared_state().pools.get(key, lambda: _new_pool(workers, name))


def _new_pool(workers: int, name: str) -> ThreadPoolExecutor:
    prepare_for_threads()
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)


async def run_cpu(fn: Callable[..., T], *args: Any) -> T:
    """Run the plugin's own CPU work (``fn(*args)``: a template render, a tokenization) off the event loop.

    Its own small pool, apart from τ's: a hung τ call must not queue it. No timeout: the work always ends
    (a render or an encode), and it raises what ``fn`` raises.
    """
    return await asyncio.get_running_loop().run_in_executor(get_pool(CPU_WORKERS, "tau-cpu"), fn, *args)


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


class EpisodeCalls:
    """Timed, off-loop calls for one engine: τ code in the bounded pool, the user simulator awaited."""

    def __init__(self, timeout_s: float, workers: int) -> None:
        self.timeout_s = timeout_s
        self.workers = workers

    async def env(self, ep: LiveEpisode, fn: Callable[..., T], *args: Any) -> T:
        """A timed τ call off the loop (reset, step, reward); failures become EnvBackendError."""
        t0 = time.perf_counter()
        try:
            return await self.blocking(fn, *args, error=EnvBackendError)
        finally:
            ep.env_s += time.perf_counter() - t0

    async def user(self, ep: LiveEpisode, awaitable: Awaitable[T]) -> T:
        """Await a user-simulator step; its unexpected failures become UserSimulatorError."""
        t0 = time.perf_counter()
        try:
            return await awaitable
        except TauPluginError:
            raise
        except Exception as exc:
            raise UserSimulatorError(f"user simulator failed: {type(exc).__name__}: {exc}") from exc
        finally:
            ep.user_s += time.perf_counter() - t0

    def runner(self, error: type[TauPluginError]) -> Callable[..., Awaitable[Any]]:
        """``await run(fn, *args)``: what a user simulator gets to reach its tools."""

        async def run(fn, *args):
            return await self.blocking(fn, *args, error=error)

        return run

    async def blocking(self, fn: Callable[..., T], *args: Any, error: type[TauPluginError]) -> T:
        """Run τ code off the loop; translate its failures into our error type at this seam."""
        try:
            return await run_blocking(fn, *args, timeout=self.timeout_s, workers=self.workers)
        except TauPluginError:
            raise
        except TimeoutError as exc:
            raise error(f"{getattr(fn, '__name__', fn)} timed out after {self.timeout_s}s") from exc
        except Exception as exc:
            raise error(f"{getattr(fn, '__name__', fn)} failed: {type(exc).__name__}: {exc}") from exc
