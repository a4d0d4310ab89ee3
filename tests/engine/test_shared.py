"""The shared state: values built once per key, failed builds retried, settings settled or refused (pure)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.loop.blocking import get_pool
from slime_tau_plugin.engine.shared import SharedMap, SharedState, shared_state


def test_concurrent_callers_of_one_key_share_one_build():
    shared: SharedMap[object] = SharedMap("test")
    builds: list[int] = []

    def build() -> object:
        builds.append(1)
        time.sleep(0.05)
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(shared.get("k", build))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and all(value is got[0] for value in got)
    assert shared.get("other", object) is not got[0] and len(shared) == 2  # another key, another value


def test_a_failed_build_is_not_kept():
    shared: SharedMap[int] = SharedMap("test")

    def broken() -> int:
        raise OSError("tokenizer files missing")

    with pytest.raises(OSError, match="tokenizer files missing"):
        shared.get("k", broken)
    assert len(shared) == 0 and shared.get("k", lambda: 7) == 7


def test_an_async_build_runs_off_the_loop_once():
    shared: SharedMap[str] = SharedMap("test")
    loop_thread: list[int] = []

    async def main() -> list[str]:
        loop_thread.append(threading.get_ident())
        return await asyncio.gather(*[shared.aget("k", lambda: str(threading.get_ident())) for _ in range(3)])

    values = asyncio.run(main())
    assert len(set(values)) == 1 and values[0] != str(loop_thread[0])


def test_a_setting_is_applied_once_and_a_different_one_is_refused_naming_both():
    registry, applied = SharedState(), []
    registry.settle("the judge", "judge-a", lambda: applied.append("a"), fix="use one judge per process")
    registry.settle("the judge", "judge-a", lambda: applied.append("again"), fix="use one judge per process")
    with pytest.raises(ConfigError, match=r"the judge 'judge-b' differs .* \('judge-a'\); use one judge per process"):
        registry.settle("the judge", "judge-b", lambda: applied.append("b"), fix="use one judge per process")
    assert applied == ["a"]


def test_a_setting_whose_apply_fails_is_not_recorded():
    registry = SharedState()

    def refuse() -> None:
        raise ConfigError("this tau2 has no judge setting")

    with pytest.raises(ConfigError, match="no judge setting"):
        registry.settle("the judge", "judge-a", refuse, fix="-")
    registry.settle("the judge", "judge-b", lambda: None, fix="-")  # nothing was settled: another value is fine


def test_first_time_is_true_once_per_topic_and_key():
    registry = SharedState()
    assert registry.first_time("warn", "top_k") and not registry.first_time("warn", "top_k")
    assert registry.first_time("warn", "min_p") and registry.first_time("other", "top_k")


def test_the_blocking_pools_are_the_registrys_one_per_size():
    assert get_pool(5) is get_pool(5) is shared_state().pools.get(5, lambda: None)
    assert get_pool(6) is not get_pool(5)


def test_a_part_is_one_instance_per_class_and_typed_by_it():
    """``part(Kind)`` builds ``Kind()`` once per process; another class is another part (no name to collide on)."""

    class Ledger:
        def __init__(self) -> None:
            self.entries: list[int] = []

    class Window(Ledger):
        pass

    state = SharedState()
    state.part(Ledger).entries.append(1)
    assert state.part(Ledger).entries == [1] and isinstance(state.part(Ledger), Ledger)
    assert state.part(Window) is not state.part(Ledger) and state.part(Window).entries == []
