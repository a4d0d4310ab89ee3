"""One retry helper for every network call the engine makes (policy ``/generate``, LLM user, judge).

Which errors are transient is the caller's decision (``retry_on``); this module only schedules the
tries, with capped exponential backoff and jitter, and logs each retried fault as ``attempt k/N``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """How transient failures (connection, timeout, HTTP 5xx) are retried."""

    attempts: int = 4
    """Total tries, first included."""
    backoff_s: float = 0.5
    """First wait; doubles each retry, with jitter."""
    max_backoff_s: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetrySettings.attempts must be >= 1, got {self.attempts}")

    def delay(self, attempt: int) -> float:
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return base * (0.5 + random.random() / 2)


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    settings: RetrySettings,
    retry_on: tuple[type[BaseException], ...],
    what: str,
) -> T:
    """Call ``await fn()`` until it succeeds, retrying ``retry_on`` errors per ``settings``."""
    for attempt in range(1, settings.attempts + 1):
        try:
            return await fn()
        except retry_on as exc:
            if attempt == settings.attempts:
                raise
            delay = settings.delay(attempt)
            logger.warning(
                "%s failed (%s), attempt %d/%d, retrying in %.2fs", what, exc, attempt, settings.attempts, delay
            )
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
