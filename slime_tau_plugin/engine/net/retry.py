"""One retry helper for every network call the engine makes (policy ``/generate``, LLM user, judge).

Which errors are transient is the caller's decision (``retry_on``); this module only schedules the
tries: capped exponential backoff with jitter, a server's ``Retry-After`` honoured, the episode's retry
budget spent, and, with an endpoint guard (``endpoints.py``), in-flight slots, outage waits and the
breaker, each asked of the guard's own methods; over several replicas of a role (``replicas.py``), a try that
fails goes on to another replica. Each retried fault is logged as ``attempt k/N``.

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

from slime_tau_plugin.engine.errors import EndpointDownError, EpisodeDeadlineError
from slime_tau_plugin.engine.net.endpoints import EndpointGuard, endpoint_registry
from slime_tau_plugin.engine.net.replicas import ReplicaSet, replica_name
from slime_tau_plugin.engine.net.stats import NetStats, current_stats

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
    replicas = None if guard is None else ReplicaSet((guard,))
    return await retry_on_replicas(lambda _guard: fn(), settings, retry_on, what, replicas)


async def retry_on_replicas(
    fn: Callable[[EndpointGuard | None], Awaitable[T]],
    settings: RetrySettings,
    retry_on: tuple[type[BaseException], ...],
    what: str,
    replicas: ReplicaSet | None,
) -> T:
    """:func:`retry_async` over the replicas of one role: ``await fn(guard)`` sends to ``guard.url``.

    Each try goes where ``replicas.pick`` says; a try that fails while another replica answers goes on to it at
    once (it counts as a try, without the backoff). Outage waits and the breaker are each replica's own; the
    request fails with :class:`EndpointDownError` only when every replica's breaker is open.

    Raises:
        as :func:`retry_async`.
    """
    stats = current_stats()
    first_failure: dict[str, float] = {}
    attempt = 0
    target: EndpointGuard | None = None
    while True:
        target = None if replicas is None else replicas.pick(avoid=target)
        try:
            return await _try_once(fn, target, stats, replicas)
        except EndpointDownError:  # this replica's breaker is open; another may not be
            if replicas is None or replicas.all_open():
                raise
            continue
        except retry_on as exc:
            attempt += 1
            if target is not None:
                try:
                    target.record_failure(exc)  # first: its outage clock must not start after this request's
                except EndpointDownError:
                    if replicas is None or replicas.all_open():
                        raise
            since = first_failure.setdefault("" if target is None else target.url, time.monotonic())
            delay = settings.delay(attempt, retry_after_of(exc))
            failover = replicas is not None and replicas.has_healthy(besides=target)
            if attempt < settings.attempts and (stats is None or stats.spend_retry()):
                _log_retry(what, exc, attempt, settings.attempts, 0.0 if failover else delay)
                if not failover:
                    await _sleep(delay, stats, what)
                continue
            if target is None:
                raise
            try:
                waited = await target.wait_out(since, exc, delay, _sleeper(stats, what))
            except EndpointDownError:
                if replicas is None or replicas.all_open():
                    raise
                continue
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


async def guarded_on_replicas(
    fn: Callable[[EndpointGuard | None], Awaitable[T]], replicas: ReplicaSet, failure: type[BaseException], what: str
) -> T:
    """:func:`guarded_call` over several replicas (the judge's): a failed call goes on to a replica that answers.

    Raises:
        as :func:`guarded_call`.
    """
    attempts = 2 if replicas.is_several else 1  # a failover is a try: with one try there would be none
    return await retry_on_replicas(fn, RetrySettings(attempts=attempts), (failure,), what, replicas)


async def _try_once(
    fn: Callable[[EndpointGuard | None], Awaitable[T]],
    guard: EndpointGuard | None,
    stats: NetStats | None,
    replicas: ReplicaSet | None,
) -> T:
    """One request: admitted by the guard, in one of its slots, counted in flight (and, over several replicas,
    per replica in the episode's stats); a success closes its breaker (when the request was sent after the outage
    clock started: see :meth:`EndpointGuard.record_success`)."""
    if guard is None:
        return await fn(None)
    await guard.admit()
    guard.inflight += 1
    failed = True
    try:
        async with guard.slot(stats):
            sent_at = time.monotonic()
            result = await fn(guard)
        failed = False
    except BaseException as exc:
        guard.settle_probe()  # a probe that failed or was cancelled answers the waiting requests too
        failed = isinstance(exc, Exception)  # a cancelled request is not the replica's failure
        raise
    finally:
        guard.inflight -= 1
        if stats is not None and replicas is not None and replicas.is_several:
            stats.count_replica(replica_name(guard), failed=failed)
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
