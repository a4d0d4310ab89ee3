"""A group's opening is asked once, a failed ask passes to the next sample, and the request cache is bounded."""

from __future__ import annotations

import asyncio

import pytest

from slime_tau_plugin.engine.users.request_cache import RequestCache, is_deterministic, request_key
from slime_tau_plugin.engine.users.shared_opening import OpeningRole, OpeningTable, opening_key
from slime_tau_plugin.reporting.user_share import user_share_metrics


def test_a_group_asks_once_and_a_failed_ask_passes_to_the_next_sample():
    table = OpeningTable()
    asked: list[str] = []

    async def ask(who: str, fail: bool = False) -> dict:
        asked.append(who)
        await asyncio.sleep(0.01)
        if fail:
            raise RuntimeError(f"{who} failed")
        return {"role": "assistant", "content": f"opening by {who}"}

    async def main():
        key = opening_key("g0", {"model": "m", "messages": [], "seed": 1}, ("http://u",))
        assert key == opening_key("g0", {"model": "m", "messages": [], "seed": 2}, ("http://u",))  # seed left out
        assert key != opening_key("g1", {"model": "m", "messages": [], "seed": 1}, ("http://u",))
        first = asyncio.ensure_future(table.first(key, lambda: ask("a", fail=True)))
        await asyncio.sleep(0)  # "a" holds the group's entry; the others wait on it
        rest = [asyncio.ensure_future(table.first(key, lambda w=w: ask(w))) for w in "bcd"]
        with pytest.raises(RuntimeError, match="a failed"):
            await first  # only the sample whose own request failed sees its error
        answers = await asyncio.gather(*rest)
        late = await table.first(key, lambda: ask("late"))  # a late sample of the group takes the kept answer
        return answers, late

    answers, late = asyncio.run(main())
    assert asked == ["a", "b"]  # one failed ask, then one ask for the whole group
    assert [role for _, role in answers] == [OpeningRole.ASKED, OpeningRole.SHARED, OpeningRole.SHARED]
    assert {m["content"] for m, _ in answers} == {"opening by b"} and late == (answers[0][0], OpeningRole.SHARED)


def test_the_request_cache_keeps_deterministic_answers_up_to_its_size():
    assert is_deterministic({"temperature": 0.0}) and is_deterministic({"temperature": 0.7, "seed": 3})
    assert not is_deterministic({"temperature": 0.7})
    cache = RequestCache(2)
    keys = [request_key({"messages": [{"content": str(i)}], "temperature": 0.0}, ("http://u",)) for i in range(3)]
    for i, key in enumerate(keys):
        cache.put(key, {"content": f"answer {i}"})
    assert cache.get(keys[0]) is None and len(cache) == 2  # the least recently used went first
    held = cache.get(keys[2])
    held["content"] = "changed by a caller"
    assert cache.get(keys[2]) == {"content": "answer 2"}  # each hit is a fresh copy
    assert (cache.hits, cache.misses) == (2, 1)
    with pytest.raises(ValueError):
        RequestCache(0)


def test_step_metrics_sum_what_the_cache_and_the_shared_opening_saved():
    metas = [
        {"user_cache_hits": 3, "user_cache_misses": 1, "user_opening_asked": 1},
        {"user_cache_hits": 0, "user_cache_misses": 4, "user_opening_shared": 1},
        {"user_requests": 5},
    ]
    assert user_share_metrics(metas) == {
        "tau_user/cache_hits": 3.0,
        "tau_user/cache_misses": 5.0,
        "tau_user/cache_hit_rate": 3 / 8,
        "tau_user/shared_opening_requests": 1.0,
        "tau_user/shared_opening_reused": 1.0,
        "tau_user/shared_opening_saved_share": 0.5,
    }
    assert user_share_metrics([{"user_requests": 5}]) == {}
