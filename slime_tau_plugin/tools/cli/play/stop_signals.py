"""Ctrl-C and SIGTERM after a rollout's batch has stopped: the summary is written whole, then exit quietly.

The batch itself turns the first signal into a clean stop and a second into an immediate one
(``runner.play``). Signals that arrive after it, while ``summary.json`` is written or while the process
winds down (servers stopping, worker threads joined at interpreter exit), would otherwise leave a
half-written report or a ``KeyboardInterrupt`` traceback from the interpreter's shutdown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_INTERRUPTED = 130


@contextlib.contextmanager
def signals_held(*, then_exit_at_once: bool) -> Iterator[None]:
    """Ignore Ctrl-C/SIGTERM for the block; afterwards restore them, or (a run already interrupted) make
    them end the process at once with exit 130."""
    try:
        before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread: nothing to hold
        yield
        return
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, _exit_now if then_exit_at_once else handler)


def _exit_now(signum: int, frame: Any) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)
