"""A shared build that fails or whose callers are cancelled ends cleanly for every waiter (issue 34 §4).

verl cancels its other agent-loop tasks once one raises, so the caller that started a build, or one waiting on
it, may be cancelled while the build runs in its thread. Before: a cancelled waiter cancelled the one future every
caller shares, and the build's end then raised ``InvalidStateError: CANCELLED`` on top of a refused chat template's
``ConfigError``. Pure: events order the steps, no sleeps.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.shared import SharedMap


def _gated(result: object) -> tuple[threading.Event, threading.Event, object]:
    """A build that says it started, waits to be released, then returns ``result`` or raises it."""
    started, release = threading.Event(), threading.Event()

    def build() -> object:
        started.set()
        release.wait(30)
        if isinstance(result, BaseException):
            raise result
        return result

    return started, release, build


async def _until(event: threading.Event) -> None:
    await asyncio.get_running_loop().run_in_executor(None, event.wait, 30)


def _loop_errors(loop: asyncio.AbstractEventLoop) -> list[dict]:
    errors: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    return errors


def test_a_failed_build_with_a_cancelled_waiter_gives_the_others_its_own_error():
    shared: SharedMap[object] = SharedMap("test")
    started, release, build = _gated(ConfigError("tau_chat_template refused: no tools in the template"))

    async def main() -> tuple[list[dict], BaseException, BaseException]:
        errors = _loop_errors(asyncio.get_running_loop())
        builder = asyncio.create_task(shared.aget("k", build))
        await _until(started)
        cancelled, waiter = (asyncio.create_task(shared.aget("k", build)) for _ in range(2))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        release.set()
        outcomes = await asyncio.gather(builder, waiter, return_exceptions=True)
        return errors, *outcomes

    errors, from_builder, from_waiter = asyncio.run(main())
    for outcome in (from_builder, from_waiter):
        assert isinstance(outcome, ConfigError), repr(outcome)
        assert outcome.__context__ is None or not isinstance(outcome.__context__, asyncio.InvalidStateError)
    assert errors == []
    assert len(shared) == 0 and shared.get("k", lambda: 7) == 7  # the failed build is not kept


def test_a_cancelled_builder_still_finishes_the_build_for_its_waiters():
    shared: SharedMap[object] = SharedMap("test")
    value = object()
    started, release, build = _gated(value)

    async def main() -> tuple[list[dict], object]:
        errors = _loop_errors(asyncio.get_running_loop())
        builder = asyncio.create_task(shared.aget("k", build))
        await _until(started)
        waiter = asyncio.create_task(shared.aget("k", build))
        await asyncio.sleep(0)
        builder.cancel()
        await asyncio.gather(builder, return_exceptions=True)
        release.set()
        return errors, await waiter

    errors, got = asyncio.run(main())
    assert got is value and errors == []
    assert shared.get("k", object) is value  # built once, kept


def test_a_sync_caller_waiting_on_a_failed_async_build_gets_its_error():
    shared: SharedMap[object] = SharedMap("test")
    started, release, build = _gated(ConfigError("refused"))
    seen: list[BaseException] = []

    def sync_caller() -> None:
        try:
            shared.get("k", build)
        except BaseException as exc:  # what the thread saw, checked below
            seen.append(exc)

    async def main() -> None:
        builder = asyncio.create_task(shared.aget("k", build))
        await _until(started)
        thread = threading.Thread(target=sync_caller)
        thread.start()
        builder.cancel()
        release.set()
        await asyncio.gather(builder, return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, thread.join, 30)

    asyncio.run(main())
    assert len(seen) == 1 and isinstance(seen[0], ConfigError)


def test_a_failed_sync_build_raises_only_its_own_error():
    shared: SharedMap[object] = SharedMap("test")

    def refuse() -> object:
        raise ConfigError("refused")

    with pytest.raises(ConfigError) as info:
        shared.get("k", refuse)
    assert info.value.__context__ is None
