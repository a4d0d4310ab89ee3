"""A GRPO group faces the same customer: :class:`OpeningTable` (``tau_user_shared_opening``).

The samples of one group should differ by the policy, not by what the customer happened to say first. With the
key on, the first request an LLM customer sends in an episode (τ's system prompt for the task and the agent's
greeting: the same for every sample of the group) goes out once per group: the first sample to ask sends it, the
others of the group await its answer and start from the same text. What follows is each sample's own.

The key is (group id, the request body without its ``seed``, the endpoint's URLs): the task and every customer
setting are in the body, so samples of one group that differ in task or customer never share; the seed is left
out because slime gives each sample of a group its own (``rollout_seed + i``). The group id comes from the
front door (slime's ``Sample.group_index``, verl's ``uid``, TRL's copies of a prompt) and only in training.

First request wins, the others await it: a table per process and event loop (asyncio futures belong to one loop).
If the first sample's request fails or its episode is cancelled, the next waiting sample asks in its place; no
sample inherits another's failure. Answered openings stay for late samples of the group, the oldest dropped past
:data:`MAX_GROUPS`. Worker processes and Ray actors each have their own table: the pool sends the samples of a
group to the same worker (``workers/pools.py``), so a group still asks once. Imports nothing of ours.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

MAX_GROUPS = 4096
"""Answered openings kept per process and loop (a late sample of an older group asks again)."""


class OpeningRole(enum.Enum):
    """How an episode got its customer's opening."""

    ASKED = "asked"
    """It sent the group's request (the first of its group, or the one that asked after a failure)."""
    SHARED = "shared"
    """It took the answer another sample of its group asked for: one request saved."""


def opening_key(group: str, body: dict[str, Any], urls: tuple[str, ...]) -> str:
    """The digest of (group, request body without ``seed``, URLs)."""
    unseeded = {k: v for k, v in body.items() if k != "seed"}
    text = json.dumps([group, list(urls), unseeded], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class OpeningTable:
    """The process's group openings (``shared_state().part(OpeningTable)``), one table per event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict[str, asyncio.Future]] = (
            weakref.WeakKeyDictionary()
        )

    async def first(self, key: str, ask: Callable[[], Awaitable[dict[str, Any]]]) -> tuple[dict[str, Any], OpeningRole]:
        """The group's opening message for ``key``: asked with ``ask()`` by the first caller, shared with the rest.

        Raises:
            Whatever ``ask()`` raises, to the caller whose own ask it was (never to the samples that waited).
        """
        entries = self._entries()
        while True:
            future = entries.get(key)
            if future is None:
                return await self._ask(entries, key, ask), OpeningRole.ASKED
            text = await asyncio.shield(future)
            if text is not None:
                entries.move_to_end(key)
                return json.loads(text), OpeningRole.SHARED
            # the asking sample failed: it took its entry out, so the next one here asks

    async def _ask(
        self, entries: OrderedDict[str, asyncio.Future], key: str, ask: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        entries[key] = future
        try:
            message = await ask()
        except BaseException:
            if entries.get(key) is future:
                del entries[key]
            future.set_result(None)  # the waiting samples ask for themselves
            raise
        future.set_result(json.dumps(message, ensure_ascii=False))
        while len(entries) > MAX_GROUPS:
            oldest = next(iter(entries))
            if not entries[oldest].done():
                break
            del entries[oldest]
        return message

    def _entries(self) -> OrderedDict[str, asyncio.Future]:
        loop = asyncio.get_running_loop()
        with self._lock:
            entries = self._loops.get(loop)
            if entries is None:
                entries = self._loops[loop] = OrderedDict()
            return entries
