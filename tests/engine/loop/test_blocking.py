"""``run_blocking``'s timeout counts a call's own running time, not its wait for a thread held by hung calls."""

from __future__ import annotations

import asyncio
import time

import pytest

from slime_tau_plugin.engine.loop.blocking import run_blocking

WORKERS = 3
"""Pool sizes no other test uses (pools are shared per size for the process): one per test."""


def test_a_call_queued_behind_hung_calls_is_not_timed_out_for_them():
    async def main():
        hung = [run_blocking(time.sleep, 0.4, timeout=0.2, workers=WORKERS) for _ in range(WORKERS)]
        healthy = run_blocking(lambda: time.sleep(0.25) or "done", timeout=0.5, workers=WORKERS)
        return await asyncio.gather(*hung, healthy, return_exceptions=True)

    *hung, healthy = asyncio.run(main())
    assert all(isinstance(r, TimeoutError) and "timed out after 0.2s" in str(r) for r in hung), hung
    assert healthy == "done"  # ~0.4 s waiting for a thread + 0.25 s running: over 0.5 s, but not its own fault


def test_a_pool_whose_threads_all_hang_still_errors():
    async def main():
        hung = [run_blocking(time.sleep, 1.0, timeout=0.2, workers=WORKERS + 2) for _ in range(WORKERS + 2)]
        waiting = run_blocking(lambda: "never", timeout=0.3, workers=WORKERS + 2)
        return await asyncio.gather(*hung, waiting, return_exceptions=True)

    *_, waiting = asyncio.run(main())
    assert isinstance(waiting, TimeoutError) and "free τ worker thread" in str(waiting)
    time.sleep(1.0)  # let the hung threads return before the next test shares the pool


@pytest.mark.parametrize("seconds", [0.0, 0.05])
def test_a_quick_call_returns_its_value(seconds):
    assert asyncio.run(run_blocking(lambda: time.sleep(seconds) or 7, timeout=1.0, workers=WORKERS)) == 7
