"""One retry helper for every network call the engine makes (policy ``/generate``, LLM user, judge).

Which errors are transient is the caller's decision (``retry_on``); this module only schedules the
tries, with capped exponential backoff and jitter, and logs each retried fault as ``attempt k/N``.

A dead endpoint fails every request of every running episode: one WARNING per kind of fault (where, with
request ids removed, and the exception type) says so once; the repeats go to DEBUG, so a killed policy
server gives a few lines, not hundreds.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

_IDS = re.compile(r"\b(rid|request_id|session_id|task|trial)=\S+ ?")
_warned: set[tuple[str, str]] = set()
"""Kinds of fault already warned about in this process (bounded by the endpoints and exception types)."""


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
            kind = (_IDS.sub("", what).strip(), type(exc).__name__)
            first = kind not in _warned
            _warned.add(kind)
            logger.log(
                logging.WARNING if first else logging.DEBUG,
                "%s failed (%s), attempt %d/%d, retrying in %.2fs%s",
                what,
                _short(str(exc)),
                attempt,
                settings.attempts,
                delay,
                "; further faults of this kind are logged at DEBUG (-vv)" if first else "",
            )
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
