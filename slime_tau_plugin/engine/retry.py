"""One retry helper for every network call the engine makes (policy ``/generate``, LLM user, judge).

Which errors are transient is the caller's decision (``retry_on``); this module only schedules the
tries: capped exponential backoff with jitter, a server's ``Retry-After`` honoured, the episode's retry
budget spent, and, with an endpoint guard (``endpoints.py``), in-flight slots, outage waits and the
breaker, each asked of the guard's own methods. Each retried fault is logged as ``attempt k/N``.

A dead endpoint fails every request of every running episode: one WARNING per kind of fault (where, with
request ids removed, and the exception type) says so once; the repeats go to DEBUG, so a killed policy
server gives a few lines, not hundreds.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from slime_tau_plugin.engine.endpoints import EndpointGuard, NetStats, current_stats, endpoint_registry
from slime_tau_plugin.engine.errors import EpisodeDeadlineError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_IDS = re.compile(r"\b(rid|request_id|session_id|task|trial)=\S+ ?")


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


_ONE_TRY = RetrySettings(attempts=1)
"""A call that retries itself gets no tries of ours; its outage waits still back off from 0.5s to 8s."""


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
        try:
            return await _try_once(fn, guard, stats)
        except retry_on as exc:
            attempt += 1
            if guard is not None:
                guard.record_failure(exc)  # first: its outage clock must not start after this request's
            first_failure = time.monotonic() if first_failure is None else first_failure
            delay = settings.delay(attempt, retry_after_of(exc))
            if attempt < settings.attempts and (stats is None or stats.spend_retry()):
                _log_retry(what, exc, attempt, settings.attempts, delay)
                await _sleep(delay, stats, what)
                continue
            waited = None if guard is None else await guard.wait_out(first_failure, exc, delay, _sleeper(stats, what))
            if waited is None:
                raise
            if stats is not None:
                stats.outage_wait_s += waited


async def guarded_call(
    fn: Callable[[], Awaitable[T]], guard: EndpointGuard, failure: type[BaseException], what: str
) -> T:
    """One try of ``await fn()`` per admission through ``guard``, for a call that retries itself (τ's judge
    through litellm): its slots and breaker apply, and an outage of the endpoint is waited out like any.

    Raises:
        EndpointDownError: the endpoint is down (breaker open).
        EpisodeDeadlineError: the episode's deadline would pass before the next try.
        ``failure``: the call failed while the endpoint answers others.
    """
    return await retry_async(fn, _ONE_TRY, (failure,), what, guard)


async def _try_once(fn: Callable[[], Awaitable[T]], guard: EndpointGuard | None, stats: NetStats | None) -> T:
    """One request: admitted by the guard, in one of its slots; a success closes its breaker (when the request
    was sent after the outage clock started: see :meth:`EndpointGuard.record_success`)."""
    if guard is None:
        return await fn()
    await guard.admit()
    try:
        async with guard.slot(stats):
            sent_at = time.monotonic()
            result = await fn()
    except BaseException:
        guard.settle_probe()  # a probe that failed or was cancelled answers the waiting requests too
        raise
    guard.record_success(sent_at)
    return result


def retry_after_of(exc: BaseException) -> float | None:
    """Seconds a server asked us to wait (``Retry-After`` of a 429/503), if the error carries one."""
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def _sleeper(stats: NetStats | None, what: str) -> Callable[[float], Awaitable[None]]:
    return lambda delay: _sleep(delay, stats, what)


async def _sleep(delay: float, stats: NetStats | None, what: str) -> None:
    if stats is not None and stats.past_deadline(delay):
        raise EpisodeDeadlineError(f"{_IDS.sub('', what).strip()}: the episode's deadline passes before the next try")
    await asyncio.sleep(delay)


def _log_retry(what: str, exc: BaseException, attempt: int, attempts: int, delay: float) -> None:
    first = endpoint_registry().first_warning((_IDS.sub("", what).strip(), type(exc).__name__))
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
