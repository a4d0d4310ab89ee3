"""What every episode of the process shares about one endpoint: in-flight slots, the outage clock, the breaker.

slime runs thousands of episodes on one event loop against one policy router, one user simulator and one
judge. Three things must hold per endpoint, not per request:

- **Bounded in flight** (``tau_*_max_inflight``): a slot is taken before a request starts and released when
  its answer is read, so the request's own timeout never counts the wait for a slot.
- **Outages cost time, not samples**: when every request to an endpoint that has answered before fails,
  the requests wait for it (jittered backoff) instead of failing their episodes, up to
  ``tau_outage_tolerance_s`` counted from the endpoint's first failure since its last success (of a request sent
  after that failure). One log line per endpoint per minute says so. An endpoint that never answered in this process
  (a wrong URL, a server not started) is not waited for: its episodes fail after their own tries, in seconds.
- **A breaker**: past the tolerance the endpoint is *down*: requests fail at once with the endpoint named
  (one probe request every few seconds is let through), and the first success closes it again.

A request that keeps failing while the same endpoint answers other requests is its own problem: it gives
up after its tries, as before. Per-episode numbers go to the episode's ``stats.NetStats``; several replicas
of one role are balanced over their guards by ``replicas.py``. The guards live in one :class:`EndpointRegistry`
(``endpoint_registry()``, held by the shared state), keyed by role, URL and settings; ``retry.py`` drives a
guard only through its methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from slime_tau_plugin.engine.errors import EndpointDownError
from slime_tau_plugin.engine.net.stats import NetStats
from slime_tau_plugin.engine.shared import shared_state

logger = logging.getLogger(__name__)

PROBE_INTERVAL_S = 5.0
"""While an endpoint is down, one request per this many seconds is let through to see if it is back."""
LOG_INTERVAL_S = 60.0
"""An endpoint that is failing is reported at most once per this many seconds."""


class EndpointRole(str, enum.Enum):
    """Which collaborator an endpoint is; the value is what log lines and errors name."""

    POLICY = "policy"
    USER = "user simulator"
    JUDGE = "judge"


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """One endpoint's limits (from ``TauConfig``)."""

    max_inflight: int | None = None
    """Requests in flight at once; None = unbounded."""
    outage_tolerance_s: float = 300.0
    """How long requests wait out an endpoint that fails everything before its breaker opens (0 = never wait)."""


@dataclass(slots=True)
class EndpointGuard:
    """One endpoint's shared state (see the module docstring); only its own methods change it.

    A request goes: ``await admit()``, ``async with slot(stats)``, then ``record_success(sent_at)`` or
    ``record_failure(exc)``; once its own tries are spent, ``await wait_out(...)`` decides between waiting
    out an outage and failing. ``settle_probe()`` ends a request that got neither answer (cancelled, a
    non-transient error).
    """

    role: EndpointRole
    url: str
    settings: GuardSettings
    has_answered: bool = False
    """A request succeeded once in this process: only then is a failing streak an outage to wait out."""
    openings: int = 0
    """Times the breaker opened (the soak's report)."""
    answers: int = 0
    inflight: int = 0
    """Requests of this process now out to it (slot waits included): what ``replicas.py`` balances on."""
    last_sent: float = 0.0
    """``monotonic()`` of the last request sent to it (``replicas.py`` probes a failing replica after a while)."""
    _down_since: float | None = None
    """``monotonic()`` of the first failure since the last success; None while the endpoint answers."""
    _is_open: bool = False
    _waiting: int = 0
    """Requests now waiting out an outage."""
    _last_probe: float = 0.0
    _probe: asyncio.Future | None = None
    _last_log: float = -LOG_INTERVAL_S
    _reported: bool = False
    _slots: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary)

    @contextlib.asynccontextmanager
    async def slot(self, stats: NetStats | None) -> AsyncIterator[None]:
        """Hold one of the endpoint's in-flight slots (no-op when unbounded); the wait goes to ``stats``."""
        if self.settings.max_inflight is None:
            yield
            return
        loop = asyncio.get_running_loop()
        semaphore = self._slots.get(loop)
        if semaphore is None:
            semaphore = self._slots[loop] = asyncio.Semaphore(self.settings.max_inflight)
        t0 = time.monotonic()
        async with semaphore:
            if stats is not None:
                stats.slot_wait_s += time.monotonic() - t0
            yield

    async def admit(self) -> None:
        """Let a request go out: always while closed. While open: one probe per ``PROBE_INTERVAL_S``; requests
        that arrive while it is out wait for its answer and go if it closed the breaker.

        Raises:
            EndpointDownError: the breaker is open and this request is not the probe.
        """
        if not self._is_open:
            return
        probe = self._probe
        if probe is not None and not probe.done() and probe.get_loop() is asyncio.get_running_loop():
            await asyncio.shield(probe)
            if not self._is_open:
                return
            raise self.down_error()
        now = time.monotonic()
        if now - self._last_probe >= PROBE_INTERVAL_S:
            self._last_probe = now
            self._probe = asyncio.get_running_loop().create_future()
            return
        raise self.down_error()

    def settle_probe(self) -> None:
        """The probe (if one is out) has its answer: release the requests waiting on it."""
        probe, self._probe = self._probe, None
        if probe is not None and not probe.done():
            probe.set_result(None)

    def record_success(self, sent_at: float) -> None:
        """A request sent at ``sent_at`` got an answer: the outage ends and the breaker closes, unless it was sent
        before the clock started (#25: such an answer, read late, made requests at an outage's onset FAIL, not wait)."""
        self.has_answered = True
        self.answers += 1
        if self._down_since is not None and sent_at < self._down_since:
            return
        if self._is_open:
            logger.warning("%s endpoint %s answers again; its breaker is closed", self.role.value, self.url)
        elif self._reported and self._down_since is not None:  # the outage _note_waiting reported is over
            logger.warning(
                "%s endpoint %s answers again after %.0fs", self.role.value, self.url, self._outage_s(time.monotonic())
            )
        self._reported = False
        self._down_since = None
        self._is_open = False
        self.settle_probe()

    def record_failure(self, exc: BaseException) -> None:
        """A request failed with a transient error: the outage clock starts (if it is not running).

        Raises:
            EndpointDownError: the breaker is open (another request opened it meanwhile), from ``exc``.
        """
        if self._down_since is None:
            self._down_since = time.monotonic()
        self.settle_probe()
        if self._is_open:
            raise self.down_error() from exc

    async def wait_out(
        self, since: float, exc: BaseException, delay: float, sleep: Callable[[float], Awaitable[None]]
    ) -> float | None:
        """A request whose own tries are spent (its first failure at ``since``) asks: wait, or fail?

        Returns the seconds it waited (at most ``delay``, through ``sleep``) when the endpoint looks down (its clock
        started by ``since`` and no request sent since has succeeded, on an endpoint that answered before) within the
        outage tolerance; None when the failure is the request's own (the caller re-raises it).

        Raises:
            EndpointDownError: the outage has lasted ``outage_tolerance_s``: the breaker opens, from ``exc``.
        """
        if not (self.has_answered and self._down_since is not None and self._down_since <= since):
            return None
        now = time.monotonic()
        tolerance = self.settings.outage_tolerance_s
        if self._outage_s(now) >= tolerance:
            self._trip(now, exc)
            raise self.down_error() from exc
        delay = min(delay, max(tolerance - self._outage_s(now), 0.05))
        self._waiting += 1
        self._note_waiting(now)
        try:
            await sleep(delay)
        finally:
            self._waiting -= 1
        return delay

    @property
    def is_open(self) -> bool:
        """The breaker is open: requests fail at once, but for one probe per ``PROBE_INTERVAL_S``."""
        return self._is_open

    @property
    def is_failing(self) -> bool:
        """Its last request failed and none sent since has succeeded (the outage clock runs)."""
        return self._down_since is not None

    def down_error(self) -> EndpointDownError:
        """The same words for every episode it fails (the CLI shows a repeated warning once; the breaker's
        log line has the last underlying error)."""
        return EndpointDownError(
            f"{self.role.value} endpoint {self.url} is down: every request failed for longer than "
            f"tau_outage_tolerance_s={self.settings.outage_tolerance_s:g}s"
        )

    def forget(self) -> None:
        """Back to "never answered, closed" (a new run in the same process)."""
        self._down_since = None
        self._is_open = False
        self.has_answered = False
        self._waiting = 0

    def _outage_s(self, now: float) -> float:
        return 0.0 if self._down_since is None else now - self._down_since

    def _trip(self, now: float, cause: BaseException | None = None) -> None:
        if not self._is_open:
            self._is_open = True
            self.openings += 1
            self._last_probe = now
            logger.error(
                "%s endpoint %s failed every request for %.0fs (tau_outage_tolerance_s=%g): breaker open, its "
                "episodes FAIL at once until it answers again; last error: %s",
                self.role.value,
                self.url,
                self._outage_s(now),
                self.settings.outage_tolerance_s,
                cause,
            )

    def _note_waiting(self, now: float) -> None:
        """One line per endpoint per minute while requests wait for it."""
        if now - self._last_log >= LOG_INTERVAL_S:
            self._last_log = now
            self._reported = True
            logger.warning(
                "%s endpoint %s has failed every request for %.0fs; %d request(s) wait for it (up to "
                "tau_outage_tolerance_s=%gs, then their episodes FAIL)",
                self.role.value,
                self.url,
                self._outage_s(now),
                self._waiting,
                self.settings.outage_tolerance_s,
            )


class EndpointRegistry:
    """The process's guards, one per (role, URL, settings), and what it has learnt about endpoints.

    Process-wide on purpose: slime runs every episode of a rollout on one event loop in one process, and
    the point of a guard is that all of them share one endpoint's slots, outage clock and breaker. Bounded
    by the endpoints a run configures. A second caller with other settings for the same endpoint (two
    configs in one process) gets its own guard: its limits are its own, never the first caller's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        """Guards are asked for on the loop and in the threads that build resources."""
        self._guards: dict[tuple[EndpointRole, str, GuardSettings], EndpointGuard] = {}
        self._answered: set[tuple[EndpointRole, str]] = set()
        """Endpoints a pre-flight check saw answer (a guard built later starts as "has answered")."""
        self._warned: set[tuple[str, str]] = set()
        """Kinds of fault already warned about (``retry.py``: one WARNING per kind, the repeats at DEBUG)."""

    def guard_for(self, role: EndpointRole, url: str, settings: GuardSettings) -> EndpointGuard:
        """The guard for ``url`` in ``role`` with ``settings`` (built on first use)."""
        url = url.rstrip("/")
        key = (role, url, settings)
        with self._lock:
            guard = self._guards.get(key)
            if guard is None:
                answered = (role, url) in self._answered
                guard = self._guards[key] = EndpointGuard(role, url, settings, has_answered=answered)
            return guard

    def note_answered(self, role: EndpointRole, url: str) -> None:
        """A pre-flight request got an answer: outages of ``url`` in ``role`` are waited for from now on."""
        key = (role, url.rstrip("/"))
        with self._lock:
            self._answered.add(key)
            guards = list(self._guards.values())
        for guard in guards:
            if (guard.role, guard.url) == key:
                guard.has_answered = True

    def first_warning(self, kind: tuple[str, str]) -> bool:
        """True the first time a kind of fault (where, exception type) is seen in this process."""
        with self._lock:
            if kind in self._warned:
                return False
            self._warned.add(kind)
            return True

    def answers(self, role: EndpointRole, url: str) -> int:
        """Requests ``url`` in ``role`` answered so far, over its guards (a soak's outage counts from the first)."""
        with self._lock:
            return sum(g.answers for g in self._guards.values() if (g.role, g.url) == (role, url.rstrip("/")))

    def breaker_openings(self) -> dict[str, int]:
        """Breaker openings per endpoint so far (for the soak's report and metrics)."""
        counts: dict[str, int] = {}
        with self._lock:
            for guard in (guard for guard in self._guards.values() if guard.openings):
                name = f"{guard.role.value} {guard.url}"
                counts[name] = counts.get(name, 0) + guard.openings
        return counts

    def forget_history(self) -> None:
        """Every guard back to "never answered, closed" (a new run in the same process, tests, the soak)."""
        with self._lock:
            self._answered.clear()
            guards = list(self._guards.values())
        for guard in guards:
            guard.forget()


def endpoint_registry() -> EndpointRegistry:
    """The process's one registry (see :class:`EndpointRegistry` for why it is process-wide), held by the process
    registry with the rest of the process's state."""
    return shared_state().part(EndpointRegistry)


def note_answered(role: EndpointRole, url: str) -> None:
    """A pre-flight request (the CLI's) got an answer: an outage from now on is waited for, even before the
    first episode's request succeeds (a server restarted while the run starts costs time, not samples)."""
    endpoint_registry().note_answered(role, url)


def guard_for(role: EndpointRole, url: str, settings: GuardSettings) -> EndpointGuard:
    """The process's guard for ``url`` in ``role`` with ``settings`` (:meth:`EndpointRegistry.guard_for`)."""
    return endpoint_registry().guard_for(role, url, settings)


def breaker_openings() -> dict[str, int]:
    """Breaker openings per endpoint so far (for the soak's report and metrics)."""
    return endpoint_registry().breaker_openings()


def forget_endpoint_history() -> None:
    """Every guard back to "never answered, closed" (a new run in the same process, tests, the soak)."""
    endpoint_registry().forget_history()
