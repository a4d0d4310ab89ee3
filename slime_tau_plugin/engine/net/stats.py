"""One episode's network bookkeeping: :class:`NetStats`, found through a context variable.

Retries, time waiting out outages and for slots, the user simulator's token usage, what each chat endpoint (the
customer's, the review judge's) took in requests, tokens and waiting (:class:`ChatMeter`, frozen into the episode's
``CustomerCost`` by ``loop/live.py``) and, where a role has several replicas (``replicas.py``), the requests and
failures each replica took. The clients count into the running
episode's stats through :func:`current_stats`, so no client signature carries them; the numbers land in
``sample.metadata`` (``as_metadata``) and slime's metrics (``adapters/slime/metrics.py``). Imports nothing of ours.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class ChatMeter:
    """One chat endpoint's running counts in an episode (``users/chat_client.py`` counts into it)."""

    requests: int = 0
    """HTTP requests sent, each try counted."""
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wait_s: float = 0.0
    """Time spent in ``ChatClient.complete``: requests, backoff, slot and outage waits."""


@dataclass(slots=True)
class NetStats:
    """One episode's network bookkeeping (lands in ``sample.metadata``)."""

    retry_budget: int | None = None
    """Retries this episode may still spend on transient faults (None = unlimited)."""
    deadline: float | None = None
    """``time.monotonic()`` past which the episode must end."""
    retries: int = 0
    outage_wait_s: float = 0.0
    """Time spent waiting for a failing endpoint to come back."""
    slot_wait_s: float = 0.0
    """Time spent waiting for an in-flight slot (``tau_*_max_inflight``)."""
    user_requests: int = 0
    user_prompt_tokens: int = 0
    user_completion_tokens: int = 0
    user_latency_s: float = 0.0
    """Time the user simulator's HTTP requests took (its tools and our own CPU excluded)."""
    user_chat: ChatMeter = field(default_factory=ChatMeter)
    """The customer's endpoint: every try, its tokens, the episode's wait for it."""
    judge_chat: ChatMeter = field(default_factory=ChatMeter)
    """The review judge's endpoint (its requests run in a context of their own that shares this meter)."""
    replica_requests: dict[str, int] = field(default_factory=dict)
    """Requests sent to each replica of a role that has several (``"<role> <url>"`` -> count)."""
    replica_failures: dict[str, int] = field(default_factory=dict)
    """Of those, the ones that failed with a transient error (the request then went on to another replica)."""
    user_cache_hits: int = 0
    """The LLM user's deterministic requests answered from the exact-request cache (``tau_user_cache_size``)."""
    user_cache_misses: int = 0
    """Those looked up and not found (then sent and stored)."""
    user_opening_asked: int = 0
    """1 when this episode sent its GRPO group's opening request (``tau_user_shared_opening``)."""
    user_opening_shared: int = 0
    """1 when it took the opening another sample of its group asked for (a request saved)."""

    def spend_retry(self) -> bool:
        """Take one retry from the budget; False when it is spent."""
        if self.retry_budget is not None:
            if self.retry_budget <= 0:
                return False
            self.retry_budget -= 1
        self.retries += 1
        return True

    def past_deadline(self, after_s: float = 0.0) -> bool:
        return self.deadline is not None and time.monotonic() + after_s > self.deadline

    def count_replica(self, name: str, *, failed: bool) -> None:
        """One request to replica ``name`` (and whether it failed)."""
        self.replica_requests[name] = self.replica_requests.get(name, 0) + 1
        if failed:
            self.replica_failures[name] = self.replica_failures.get(name, 0) + 1

    def as_metadata(self) -> dict[str, float | int | dict[str, int]]:
        meta: dict[str, float | int | dict[str, int]] = {
            "net_retries": self.retries,
            "outage_wait_s": round(self.outage_wait_s, 4),
            "slot_wait_s": round(self.slot_wait_s, 4),
            "user_requests": self.user_requests,
            "user_prompt_tokens": self.user_prompt_tokens,
            "user_completion_tokens": self.user_completion_tokens,
            "user_latency_s": round(self.user_latency_s, 4),
        }
        if self.user_cache_hits or self.user_cache_misses:
            meta["user_cache_hits"] = self.user_cache_hits
            meta["user_cache_misses"] = self.user_cache_misses
        if self.user_opening_asked or self.user_opening_shared:
            meta["user_opening_asked"] = self.user_opening_asked
            meta["user_opening_shared"] = self.user_opening_shared
        if self.replica_requests:
            meta["replica_requests"] = dict(self.replica_requests)
            meta["replica_failures"] = dict(self.replica_failures)
        return meta


_episode_stats: contextvars.ContextVar[NetStats | None] = contextvars.ContextVar("tau_episode_net", default=None)


def current_stats() -> NetStats | None:
    """The running episode's stats (None outside an episode, e.g. a CLI pre-flight request)."""
    return _episode_stats.get()


@contextlib.contextmanager
def episode_stats(stats: NetStats):
    """Make ``stats`` the current episode's for the duration of the block (each asyncio task has its own)."""
    token = _episode_stats.set(stats)
    try:
        yield stats
    finally:
        _episode_stats.reset(token)
