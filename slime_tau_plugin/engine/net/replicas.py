"""Several replicas of one endpoint role (user simulator, judge), balanced by the requests each has in flight.

A user simulator that must keep up with a cluster of policy servers runs as several servers (one per node, or a
list): ``tau_user_base_url`` / ``tau_judge_base_url`` take several URLs, comma-separated (``split_urls``). Each
replica keeps its own guard (``endpoints.py``: slots, outage clock, breaker), so one replica's failure is that
replica's alone. :meth:`ReplicaSet.pick` chooses where a request goes:

- replicas whose breaker is open are skipped while any other is closed;
- a replica whose last request failed (its outage clock runs) is skipped while a healthy one exists, except for
  one probe request per ``PROBE_INTERVAL_S``, so a replica that comes back gets traffic again;
- among the rest, the fewest requests in flight (this process's, over every episode); ties go round-robin.

``retry.py`` drives it: a request that fails on one replica goes on to another at once (the try counts, the
backoff is skipped); only when every replica fails does the single-endpoint behaviour apply (outage waits, then
the breaker). A judge call runs τ's code in a worker thread, which reads the chosen URL through
:func:`chosen_url` (:func:`on_replica` hands it over). Imports ``endpoints`` and ``process`` only.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from slime_tau_plugin.engine.net.endpoints import (
    PROBE_INTERVAL_S,
    EndpointGuard,
    EndpointRole,
    GuardSettings,
    guard_for,
)
from slime_tau_plugin.engine.shared import shared_state

T = TypeVar("T")

_chosen = threading.local()


def split_urls(value: str | Sequence[str]) -> tuple[str, ...]:
    """The URLs of a ``*_base_url`` value: comma-separated in one string, or a list (a YAML list); blanks dropped."""
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(part.strip().rstrip("/") for part in parts if part.strip())


def bad_url(url: str) -> bool:
    """Not an ``http(s)://host[:port][/path]`` URL."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is not a number
    except ValueError:
        return True
    return parts.scheme not in ("http", "https") or not parts.hostname


@dataclass(slots=True)
class ReplicaSet:
    """The guards of one role's replicas, in the configured order; shared by the episodes of a config."""

    guards: tuple[EndpointGuard, ...]
    _turn: itertools.count = field(default_factory=itertools.count)

    @classmethod
    def for_urls(cls, role: EndpointRole, urls: Sequence[str], settings: GuardSettings) -> ReplicaSet:
        """The process's set for ``urls`` in ``role``: one guard per URL, each with ``settings``."""
        if not urls:
            raise ValueError(f"a {role.value} replica set needs at least one URL")
        key = (role, tuple(urls), settings)  # one set per process and key: its round-robin turn is shared
        sets = shared_state().notes("replica sets")
        found = sets.get(key)
        if found is None:
            found = sets.setdefault(key, cls(tuple(guard_for(role, url, settings) for url in urls)))
        return found

    @property
    def is_several(self) -> bool:
        return len(self.guards) > 1

    def pick(self, avoid: EndpointGuard | None = None) -> EndpointGuard:
        """Where the next request goes (see the module docstring); ``avoid``: the replica that just failed it."""
        if not self.is_several:
            return self.guards[0]
        now = time.monotonic()
        closed = [g for g in self.guards if not g.is_open]
        if not closed:  # every breaker is open: the oldest-tried one, whose probe is the likeliest due
            choice = min(self.guards, key=lambda g: g.last_sent)
        else:
            others = [g for g in closed if g is not avoid] or closed
            due = [g for g in others if g.is_failing and now - g.last_sent >= PROBE_INTERVAL_S]
            healthy = [g for g in others if not g.is_failing]
            if due and healthy:  # a failing replica's probe: is it back?
                choice = due[0]
            else:
                pool = healthy or others
                least = min(g.inflight for g in pool)
                tied = [g for g in pool if g.inflight == least]
                choice = tied[next(self._turn) % len(tied)]
        choice.last_sent = now
        return choice

    def has_healthy(self, besides: EndpointGuard | None) -> bool:
        """Another replica than ``besides`` answers (closed breaker, no failure since its last success)."""
        return any(g is not besides and not g.is_open and not g.is_failing for g in self.guards)

    def all_open(self) -> bool:
        """Every replica's breaker is open: the role is down."""
        return all(g.is_open for g in self.guards)


def replica_name(guard: EndpointGuard) -> str:
    """How metadata and metrics name a replica: ``user http://a:8000/v1``."""
    return f"{guard.role.name.lower()} {guard.url}"


def on_replica(url: str, fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` wrapped to run with ``url`` as :func:`chosen_url` in the thread that calls it (a worker thread)."""

    def call(*args: Any, **kwargs: Any) -> T:
        previous = getattr(_chosen, "url", None)
        _chosen.url = url
        try:
            return fn(*args, **kwargs)
        finally:
            _chosen.url = previous

    call.__name__ = getattr(fn, "__name__", "call")
    return call


def chosen_url(default: str) -> str:
    """The replica URL :func:`on_replica` chose for this thread's call, else ``default``."""
    return getattr(_chosen, "url", None) or default
