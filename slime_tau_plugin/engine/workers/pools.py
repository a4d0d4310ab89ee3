"""Where episodes run when ``tau_episode_workers`` > 0: a :class:`WorkerPool` of worker processes or Ray actors.

The pool is the trainer's process's side: it sends each request to the live worker with the fewest episodes in
flight (the samples of one GRPO group to the worker its first sample went to, so the group's customer opening is
asked once: ``users/shared_opening.py``), resolves the caller's future when the answer comes back, forwards the
trainer's abort (one watcher thread polls every waiting episode's abort check, so slime's loop pays nothing per
episode) and replaces a worker that dies. The episodes that worker held, and only those, are played again on the
replacement from what their request said (a fresh start, or the suspended state the trainer handed back); an
episode whose worker dies a second time is FAILED naming both deaths (``EpisodeWorkerError``, failed endpoint
``worker``); workers that keep dying before they answer anything are not replaced for ever
(:data:`MAX_SILENT_DEATHS`). Every sample names where it ran (``tau_worker``) and the workers lost under it
(``tau_worker_lost``).

A transport (``process_pool.py``, ``ray_actors.py``) implements :class:`WorkerSlot`; ``registry.pool_for`` keeps one
pool per config per process.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from slime_tau_plugin.engine.choices import WorkerKind
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import EpisodeWorkerError
from slime_tau_plugin.engine.outcome import failed_result
from slime_tau_plugin.engine.workers.messages import EpisodeRequest, FinishedEpisode
from slime_tau_plugin.engine.workers.play import finish

logger = logging.getLogger(__name__)

ABORT_POLL_S = 0.05
"""How often the watcher asks waiting episodes' abort checks (an abort reaches a worker within this, plus a turn)."""
MAX_LOST_WORKERS = 1
"""Worker deaths an episode is played again after; the next one FAILS it."""
MAX_SILENT_DEATHS = 3
"""Workers in a row that die before answering anything (one that cannot start: an import error, no memory): the
pool stops replacing them and FAILS every episode with the last reason, so the failure guard stops the run."""
GROUPS_ROUTED = 4096
"""GRPO groups whose worker the pool remembers (the oldest forgotten first)."""


@dataclass(eq=False)
class Pending:
    """One request waiting for its answer, on the event loop that asked."""

    request: EpisodeRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[FinishedEpisode]
    slot: WorkerSlot | None = None
    aborted: bool = False
    lost: list[str] = field(default_factory=list)

    def resolve(self, finished: FinishedEpisode | None = None, error: BaseException | None = None) -> None:
        """Complete the caller's future from any thread (a closed loop means nobody waits any more)."""

        def settle() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(finished)  # type: ignore[arg-type]

        try:
            self.loop.call_soon_threadsafe(settle)
        except RuntimeError:
            pass


class WorkerSlot(ABC):
    """One worker as the pool sees it: a transport sends requests and aborts and reports answers and death."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.name = f"{pool.kind.value}-worker-{index}"
        self.pending: dict[str, Pending] = {}
        self.alive = True
        self.answered = False

    @abstractmethod
    def submit(self, pending: Pending) -> None:
        """Send the request (never blocks the caller's loop)."""

    @abstractmethod
    def abort(self, request_id: str) -> None:
        """Tell the worker the trainer no longer wants this episode."""

    @abstractmethod
    def close(self) -> None:
        """Stop the worker (its episodes are not played again)."""


class WorkerPool(ABC):
    """Worker slots for one config; see the module docstring."""

    kind: WorkerKind

    def __init__(self, config: TauConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._watched: dict[str, Pending] = {}
        self._watcher: threading.Thread | None = None
        self._closed = False
        self.replaced = 0
        self.broken: str | None = None
        """Why the pool stopped replacing workers (:data:`MAX_SILENT_DEATHS`); None while it works."""
        self._silent_deaths = 0
        self._group_slots: OrderedDict[str, int] = OrderedDict()
        """A GRPO group -> the index of the worker its samples go to."""
        with self._lock:  # a worker that dies at once (``died``) waits until every slot and counter exists
            self.slots: list[WorkerSlot] = [self._start(i) for i in range(config.episode_workers)]

    @abstractmethod
    def _start(self, index: int) -> WorkerSlot:
        """Start worker ``index`` (a replacement keeps the index)."""

    async def run(self, request: EpisodeRequest) -> FinishedEpisode:
        """Play ``request`` on a worker; the answer as in-process, plus where it ran.

        Raises:
            ConfigError: the worker found a setting unusable.
        """
        loop = asyncio.get_running_loop()
        pending = Pending(request, loop, loop.create_future())
        self._dispatch(pending)
        try:
            finished = await pending.future
        except asyncio.CancelledError:
            self._abort(pending)
            raise
        finally:
            with self._lock:
                self._watched.pop(request.request_id, None)
        where = dict(finished.worker)
        if pending.lost:
            where["tau_worker_lost"] = list(pending.lost)
        return replace(finished, worker=where)

    def completed(self, slot: WorkerSlot, request_id: str, finished: Any = None, error: Any = None) -> None:
        """A transport's answer for ``request_id`` (any thread)."""
        with self._lock:
            pending = slot.pending.pop(request_id, None)
            slot.answered = True
        if pending is not None:
            pending.resolve(finished, error)

    def died(self, slot: WorkerSlot, why: str) -> None:
        """A transport saw ``slot``'s worker die: replace it and play its episodes again (any thread)."""
        with self._lock:
            if not slot.alive:
                return
            slot.alive = False
            orphans = list(slot.pending.values())
            slot.pending.clear()
            if self._closed:
                return
            self._silent_deaths = 0 if slot.answered else self._silent_deaths + 1
            if self._silent_deaths >= MAX_SILENT_DEATHS:
                self.broken = f"{self._silent_deaths} workers in a row died before answering, the last: {why}"
            else:
                self.slots[slot.index] = self._start(slot.index)
                self.replaced += 1
        logger.warning("%s died (%s): %d episodes in flight on it are played again", slot.name, why, len(orphans))
        for pending in orphans:
            pending.lost.append(f"{slot.name}: {why}")
            if len(pending.lost) > MAX_LOST_WORKERS:
                self._fail(pending, f"the episode's worker died twice: {'; '.join(pending.lost)}")
            else:
                self._dispatch(pending)

    def _fail(self, pending: Pending, reason: str) -> None:
        pending.resolve(finish(failed_result(self.config, EpisodeWorkerError(reason)), None))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            slots = list(self.slots)
        for slot in slots:
            slot.close()

    def _dispatch(self, pending: Pending) -> None:
        with self._lock:
            live = [s for s in self.slots if s.alive]
            if not live:
                reason = self.broken or "the pool is closed"
            else:
                reason = None
                slot = self._slot_for(pending.request.options.group, live)
                slot.pending[pending.request.request_id] = pending
                pending.slot = slot
                if pending.request.options.should_abort is not None:
                    self._watched[pending.request.request_id] = pending
                    if self._watcher is None:
                        self._watcher = threading.Thread(target=self._watch, name="tau-abort-watcher", daemon=True)
                        self._watcher.start()
        if reason is not None:
            self._fail(pending, f"no episode worker left: {reason}")
            return
        slot.submit(pending)
        if pending.aborted:
            slot.abort(pending.request.request_id)

    def _slot_for(self, group: str | None, live: list[WorkerSlot]) -> WorkerSlot:
        """The live worker with the fewest episodes, or the group's worker while it lives (under the lock)."""
        index = self._group_slots.get(group) if group is not None else None
        if index is not None and self.slots[index].alive:
            self._group_slots.move_to_end(group)  # type: ignore[arg-type]
            return self.slots[index]
        slot = min(live, key=lambda s: len(s.pending))
        if group is not None:
            self._group_slots[group] = slot.index
            while len(self._group_slots) > GROUPS_ROUTED:
                self._group_slots.popitem(last=False)
        return slot

    def _abort(self, pending: Pending) -> None:
        pending.aborted = True
        if pending.slot is not None:
            pending.slot.abort(pending.request.request_id)

    def _watch(self) -> None:
        while not self._closed:
            time.sleep(ABORT_POLL_S)
            with self._lock:
                waiting = [p for p in self._watched.values() if not p.aborted]
            for pending in waiting:
                try:
                    check = pending.request.options.should_abort
                    if check is not None and check():
                        self._abort(pending)
                except Exception:  # an abort check that fails never stops the watcher
                    logger.exception("abort check failed")
