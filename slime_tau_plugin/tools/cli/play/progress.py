"""Rollout progress on stderr: a tqdm bar on a terminal, else one line every N samples (a log file shows it).

N is 10% of the run, at most 50 samples; the last sample always prints a line.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any, TextIO

LINE_EVERY_MAX = 50


class Progress:
    """Counts finished samples by status and reports them; ``update`` is called once per sample."""

    def __init__(self, total: int, *, stream: TextIO | None = None, done_before: int = 0) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.done_before = done_before
        self.done = 0
        self.statuses: Counter[str] = Counter()
        self.every = max(1, min(LINE_EVERY_MAX, -(-total // 10)))
        self._t0 = time.monotonic()
        self._bar = self._tqdm() if _is_tty(self.stream) else None

    def update(self, sample: Any) -> None:
        self.done += 1
        self.statuses[getattr(sample.status, "value", str(sample.status))] += 1
        if self._bar is not None:
            self._bar.set_postfix_str(self._counts(), refresh=False)
            self._bar.update(1)
        elif self.done % self.every == 0 or self.done == self.total:
            elapsed = time.monotonic() - self._t0
            left = elapsed / self.done * (self.total - self.done)
            before = f" (+{self.done_before} from before)" if self.done_before else ""
            print(
                f"rollout: {self.done}/{self.total} samples{before} ({100 * self.done // max(self.total, 1)}%) | "
                f"{self._counts()} | {elapsed:.0f}s elapsed, ~{left:.0f}s left",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def _counts(self) -> str:
        return ", ".join(f"{n} {status}" for status, n in sorted(self.statuses.items()))

    def _tqdm(self) -> Any:
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        return tqdm(total=self.total, desc="episodes", unit="ep", file=self.stream)


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
