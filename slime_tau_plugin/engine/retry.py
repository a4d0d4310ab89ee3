"""One retry helper for every network call the engine makes (policy ``/generate``, LLM user, judge).

Which errors are transient is the caller's decision (``retry_on``); this module only schedules the
tries: capped exponential backoff with jitter, a server's ``Retry-After`` honoured, the episode's retry
budget spent, and, with an endpoint guard (``endpoints.py``), in-flight slots, outage waits and the
breaker. Each retried fault is logged as ``attempt k/N``.

A dead endpoint fails every request of every running episode: one WARNING per kind of fault (where, with
request ids removed, and the exception type) says so once; the repeats go to DEBUG, so a killed policy
server gives a few lines, not hundreds.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from slime_tau_plugin.engine.endpoints import EndpointGuard, EpisodeDeadlineError, NetStats, current_stats

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

    max_retry_after_s: float = 60.0
    """A server's ``Retry-After`` is honoured up to this."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Capped exponential backoff with jitter; at least the server's ``Retry-After`` (capped) when given."""
        base = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1))) * (0.5 + random.random() / 2)
        return base if retry_after is None else max(base, min(retry_after, self.max_retry_after_s))


async def retry_async(
    fn: Callable[[], Awaitable[T]],
    settings: RetrySettings,
    retry_on: tuple[type[BaseException], ...],
    what: str,
    guard: EndpointGuard | None = None,
) -> T:
    """Call ``await fn()`` until it succeeds, retrying ``retry_on`` errors per ``settings``.

    With a ``guard`` (the endpoint's shared state): the request holds an in-flight slot only while it runs;
    once its tries are spent it waits out an endpoint that fails *every* request (up to the guard's outage
    tolerance, the wait charged to the episode, not its retry budget); past the tolerance, or while the
    breaker is open, it raises :class:`EndpointDownError`. A ``retry_after`` attribute on the error (seconds,
    from a 429/503's ``Retry-After``) stretches the wait. The episode's :class:`NetStats`, when there is one,
    counts retries and waits and bounds them (retry budget, deadline).

    Raises:
        EndpointDownError: the endpoint is down (breaker open).
        EpisodeDeadlineError: the episode's deadline would pass before the next try.
        the last ``retry_on`` error: tries (or the episode's retry budget) spent on a live endpoint.
    """
    stats = current_stats()
    first_failure: float | None = None
    attempt = 0
    while True:
        if guard is not None and not await guard.admit():
            raise guard.down_error()
        try:
            async with guard.slot(stats) if guard is not None else contextlib.nullcontext():
                result = await fn()
        except retry_on as exc:
            now = time.monotonic()
            attempt += 1
            first_failure = now if first_failure is None else first_failure
            if guard is not None:
                guard.record_failure(now)
                guard.settle_probe()
                if guard.is_open:
                    raise guard.down_error() from exc
            if attempt < settings.attempts and (stats is None or stats.spend_retry()):
                delay = settings.delay(attempt, retry_after_of(exc))
                _log_retry(what, exc, attempt, settings.attempts, delay)
                await _sleep(delay, stats, what)
                continue
            if guard is None or not guard.looks_down(first_failure):
                raise
            if guard.outage_s(now) >= guard.settings.outage_tolerance_s:
                guard.trip(now, exc)
                raise guard.down_error() from exc
            remaining = guard.settings.outage_tolerance_s - guard.outage_s(now)
            delay = min(settings.delay(attempt, retry_after_of(exc)), max(remaining, 0.05))
            guard.waiting += 1
            guard.note_waiting(now)
            try:
                await _sleep(delay, stats, what)
            finally:
                guard.waiting -= 1
            if stats is not None:
                stats.outage_wait_s += delay
        except BaseException:
            if guard is not None:
                guard.settle_probe()  # a probe that was cancelled or failed otherwise answers nothing
            raise
        else:
            if guard is not None:
                guard.record_success()
                guard.settle_probe()
            return result


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds a server asked us to wait (``Retry-After`` of a 429/503), if the error carries one."""
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def parse_retry_after(header: str | None) -> float | None:
    """``Retry-After`` in seconds: its delta-seconds form, or an HTTP date; None when absent or unreadable."""
    if not header:
        return None
    header = header.strip()
    if header.isdigit():
        return float(header)
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


async def _sleep(delay: float, stats: NetStats | None, what: str) -> None:
    if stats is not None and stats.past_deadline(delay):
        raise EpisodeDeadlineError(f"{_IDS.sub('', what).strip()}: the episode's deadline passes before the next try")
    await asyncio.sleep(delay)


def _log_retry(what: str, exc: BaseException, attempt: int, attempts: int, delay: float) -> None:
    kind = (_IDS.sub("", what).strip(), type(exc).__name__)
    first = kind not in _warned
    _warned.add(kind)
    logger.log(
        logging.WARNING if first else logging.DEBUG,
        "%s failed (%s), attempt %d/%d, retrying in %.2fs%s",
        what,
        _short(str(exc)),
        attempt,
        attempts,
        delay,
        "; further faults of this kind are logged at DEBUG (-vv)" if first else "",
    )


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
