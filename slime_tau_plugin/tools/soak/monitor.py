"""How the soak's own process holds up: the event loop's worst stall and resident memory.

slime runs every ``generate`` of a step on one loop, so anything blocking it (a tokenizer call, τ code, a
sync HTTP call that slipped in) stalls every episode at once. :class:`LoopWatchdog` sleeps a short tick in a
loop and records how late it wakes: the lateness is the longest time something held the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

TICK_S = 0.05


def rss_mb(pid: int | str = "self") -> float | None:
    """Resident set size of ``pid`` (default: this process) in MB: psutil when installed, else
    ``/proc/<pid>/status`` (``VmRSS``); None when neither can tell (the process is gone, not Linux)."""
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            process = psutil.Process() if pid == "self" else psutil.Process(int(pid))
            return process.memory_info().rss / 2**20
        except psutil.Error:
            return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


class LoopWatchdog:
    """Wakes every :data:`TICK_S` on the running loop and keeps the worst lateness (and how often it passed
    100 ms), until :meth:`stop`."""

    def __init__(self, tick_s: float = TICK_S) -> None:
        self.tick_s = tick_s
        self.worst_s = 0.0
        self.worst_at_s = 0.0
        """Seconds after :meth:`start` when the worst stall ended."""
        self.ticks = 0
        self.stalls_over_100ms = 0
        self._task: asyncio.Task | None = None
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="soak-loop-watchdog")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.tick_s)
            now = time.monotonic()
            late = now - before - self.tick_s
            self.ticks += 1
            if late > 0.1:
                self.stalls_over_100ms += 1
            if late > self.worst_s:
                self.worst_s, self.worst_at_s = late, now - self._t0
