"""``replicas.py`` and ``net/user_budget.py`` without HTTP: where a request goes among a role's replicas, each
replica's own guard, the config's URL lists, and the LLM user's token ledger (real guards, a call that fails on
purpose; the HTTP side is ``tests/engine/net/test_user_replicas.py``)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError, EndpointDownError, UserTokenBudgetError
from slime_tau_plugin.engine.net.endpoints import PROBE_INTERVAL_S, EndpointRole, GuardSettings
from slime_tau_plugin.engine.net.replicas import ReplicaSet, split_urls
from slime_tau_plugin.engine.net.retry import RetrySettings, retry_on_replicas
from slime_tau_plugin.engine.net.stats import NetStats, episode_stats
from slime_tau_plugin.engine.net.user_budget import UserTokenBudget, UserTokenLedger

FAST = RetrySettings(attempts=3, backoff_s=0.01, max_backoff_s=0.02)


class DownError(Exception):
    pass


class Replicas:
    """Calls by URL: a URL in ``down`` fails, the others answer with their URL; each call counted."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.calls: list[str] = []

    async def __call__(self, guard) -> str:
        self.calls.append(guard.url)
        await asyncio.sleep(0)
        if guard.url in self.down:
            raise DownError(f"{guard.url} refused the connection")
        return guard.url


def _set(*urls: str, tolerance: float = 60.0) -> ReplicaSet:
    settings = GuardSettings(outage_tolerance_s=tolerance)
    return ReplicaSet.for_urls(EndpointRole.USER, [f"http://{u}-{time.monotonic_ns()}" for u in urls], settings)


def test_the_replica_with_fewest_requests_in_flight_is_picked_and_ties_take_turns():
    replicas = _set("a", "b", "c")
    a, b, c = replicas.guards
    a.inflight, b.inflight, c.inflight = 2, 1, 1
    picks = [replicas.pick().url for _ in range(4)]
    assert set(picks) == {b.url, c.url} and picks[0] != picks[1]  # the tie alternates
    c.inflight = 0
    assert replicas.pick() is c


def test_a_failing_replica_is_skipped_but_probed_and_an_open_one_is_skipped():
    replicas = _set("a", "b")
    a, b = replicas.guards
    a.record_success(time.monotonic())
    a.last_sent = time.monotonic()
    a.record_failure(DownError("refused"))  # a was just tried and failed: its outage clock runs
    assert {replicas.pick().url for _ in range(4)} == {b.url}
    a.last_sent = time.monotonic() - PROBE_INTERVAL_S  # a probe is due
    assert replicas.pick() is a and replicas.pick() is b  # one probe, then back to b
    a._is_open = True  # noqa: SLF001  (the breaker's state, as wait_out's trip leaves it)
    assert not replicas.all_open() and {replicas.pick().url for _ in range(4)} == {b.url}


def test_a_request_failing_on_a_dead_replica_goes_on_to_a_live_one_at_once_and_is_counted():
    replicas = _set("live", "dead")
    live, dead = replicas.guards
    endpoint = Replicas()
    endpoint.down.add(dead.url)

    async def main() -> tuple[list[str], NetStats]:
        with episode_stats(NetStats()) as stats:
            answers = [await retry_on_replicas(endpoint, FAST, (DownError,), "user", replicas) for _ in range(6)]
        return answers, stats

    t0 = time.monotonic()
    answers, stats = asyncio.run(main())
    assert answers == [live.url] * 6  # every request answered
    assert endpoint.calls.count(dead.url) == 1  # tried once, then left alone (no probe due within 5 s)
    assert time.monotonic() - t0 < PROBE_INTERVAL_S
    assert stats.replica_requests == {f"user {live.url}": 6, f"user {dead.url}": 1}
    assert stats.replica_failures == {f"user {dead.url}": 1} and stats.retries == 1


def test_when_every_replica_fails_the_single_endpoint_rules_apply():
    never = _set("a", "b")  # never answered: each request fails after its own tries
    endpoint = Replicas()
    endpoint.down = {g.url for g in never.guards}
    with pytest.raises(DownError):
        asyncio.run(retry_on_replicas(endpoint, FAST, (DownError,), "user", never))
    assert len(endpoint.calls) == FAST.attempts

    answered = _set("a", "b", tolerance=0.2)  # both answered, then both went down: waited out, then down
    for guard in answered.guards:
        guard.record_success(time.monotonic())
    endpoint.down = {g.url for g in answered.guards}
    with pytest.raises(EndpointDownError, match="is down"):
        asyncio.run(retry_on_replicas(endpoint, FAST, (DownError,), "user", answered))
    assert answered.all_open()


def test_url_lists_are_comma_separated_or_a_yaml_list_and_each_url_is_checked():
    assert split_urls(" http://a:8000/v1/ , http://b:8000/v1,") == ("http://a:8000/v1", "http://b:8000/v1")
    config = TauConfig(user="llm", user_model="m", user_base_url=["http://a:8000/v1", "http://b:8000/v1"])
    assert config.user_base_url == "http://a:8000/v1,http://b:8000/v1"
    assert config.user_endpoint().urls == ("http://a:8000/v1", "http://b:8000/v1")
    args = SimpleNamespace(tau_judge_base_url="http://j1/v1,http://j2/v1", tau_judge_model="j")  # slime's YAML
    assert config_from_args(args).judge_endpoint().urls == ("http://j1/v1", "http://j2/v1")
    with pytest.raises(ConfigError, match=r"^tau_user_base_url has 'b:8000/v1', which is not an http\(s\) URL; "):
        TauConfig(user="llm", user_model="m", user_base_url="http://a:8000/v1,b:8000/v1")
    with pytest.raises(ConfigError, match=r"^--judge-base-url has 'http://j:port', which is not an http\(s\) URL"):
        TauConfig.from_values(
            {"judge_base_url": "http://j:port", "judge_model": "j"}, key_of=lambda _: "--judge-base-url"
        )


def test_the_token_ledger_refuses_once_a_budget_is_spent_and_a_new_step_starts_again():
    ledger = UserTokenLedger()
    step = UserTokenBudget(per_step=100)
    ledger.check(step)
    ledger.spend(120)
    with pytest.raises(UserTokenBudgetError, match="120 tokens used, tau_user_token_budget_per_step=100"):
        ledger.check(step)
    assert ledger.end_step() == {"user_tokens/step": 120.0, "user_tokens/total": 120.0, "user_tokens/refused": 1.0}
    ledger.check(step)  # a new step
    ledger.spend(50)
    ledger.check(step)  # 50 this step
    with pytest.raises(UserTokenBudgetError, match="170 tokens used, tau_user_token_budget_total=150"):
        ledger.check(UserTokenBudget(per_step=100, total=150))
    with pytest.raises(ConfigError, match=r"^tau_user_token_budget_total=0 is invalid; expected tokens >= 1 or null$"):
        TauConfig(user_token_budget_total=0)
