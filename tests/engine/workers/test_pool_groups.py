"""A worker pool sends the samples of one GRPO group to one worker (its customer opening is then asked once there),
the other requests to the least busy worker, and a group whose worker died to a live one.

The transport is the seam replaced here: a slot that keeps what it is sent, in the test's process, in place of a
worker process or a Ray actor (``WorkerSlot`` is the pool's transport interface)."""

from __future__ import annotations

import asyncio

from slime_tau_plugin.engine.choices import WorkerKind
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.request import EpisodeOptions, EpisodeRequest
from slime_tau_plugin.engine.outcome import failed_result
from slime_tau_plugin.engine.workers.play import finish
from slime_tau_plugin.engine.workers.pools import Pending, WorkerPool, WorkerSlot


class _HeldSlot(WorkerSlot):
    def submit(self, pending: Pending) -> None:
        self.pool.sent.append((self.index, pending.request.options.group))

    def abort(self, request_id: str) -> None:
        pass

    def close(self) -> None:
        pass


class _HeldPool(WorkerPool):
    kind = WorkerKind.PROCESS

    def __init__(self, config: TauConfig) -> None:
        self.sent: list[tuple[int, str | None]] = []
        super().__init__(config)

    def _start(self, index: int) -> WorkerSlot:
        return _HeldSlot(self, index)

    def answer_all(self) -> None:
        for slot in self.slots:
            for request_id in list(slot.pending):
                self.completed(slot, request_id, finish(failed_result(self.config, RuntimeError("held")), None))


def test_a_group_goes_to_one_worker_and_other_requests_to_the_least_busy():
    pool = _HeldPool(TauConfig(episode_workers=2))
    groups = ["a", "b", "a", None, "b", "a", None]

    async def main():
        runs = [
            asyncio.ensure_future(pool.run(EpisodeRequest(f"r{i}", 0, {}, {}, EpisodeOptions(group=g))))
            for i, g in enumerate(groups)
        ]
        await asyncio.sleep(0)
        pool.slots[0].alive = False  # group a's worker dies: a's next sample goes to a live worker
        late = asyncio.ensure_future(pool.run(EpisodeRequest("late", 0, {}, {}, EpisodeOptions(group="a"))))
        await asyncio.sleep(0)
        pool.answer_all()
        return await asyncio.gather(*runs, late)

    asyncio.run(main())
    by_group: dict[str | None, set[int]] = {}
    for index, group in pool.sent[: len(groups)]:
        by_group.setdefault(group, set()).add(index)
    assert by_group["a"] == {0} and by_group["b"] == {1}  # b's first sample found worker 0 busier
    assert [i for i, g in pool.sent[: len(groups)] if g is None] == [1, 0]  # the least busy at each dispatch
    assert pool.sent[-1] == (1, "a")
