"""The retry schedule (``retry.py``): Retry-After read in both of its forms and honoured, the per-episode
budget spent, capped."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from slime_tau_plugin.engine.net.http_errors import parse_retry_after
from slime_tau_plugin.engine.net.retry import RetrySettings, retry_async
from slime_tau_plugin.engine.net.stats import NetStats, episode_stats


@pytest.mark.parametrize(
    ("header", "expected"),
    [("3", 3.0), (" 0 ", 0.0), (None, None), ("", None), ("soon", None), ("-1", None)],
)
def test_retry_after_in_seconds(header, expected):
    assert parse_retry_after(header) == expected


def test_retry_after_as_an_http_date():
    header = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after(header) <= 30
    assert parse_retry_after(email.utils.formatdate(time.time() - 30, usegmt=True)) == 0.0


def test_the_delay_is_at_least_the_servers_retry_after_but_capped():
    settings = RetrySettings(backoff_s=0.1, max_backoff_s=0.2, max_retry_after_s=5.0)
    assert all(settings.delay(1) <= 0.1 for _ in range(50))
    assert settings.delay(1, retry_after=2.0) == 2.0
    assert settings.delay(1, retry_after=600.0) == 5.0


class BusyError(Exception):
    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__("busy")
        self.retry_after = retry_after


def _failing(times: int, retry_after: float | None = None):
    calls = []

    async def fn():
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise BusyError(retry_after)
        return "ok"

    return fn, calls


def test_a_retry_waits_for_retry_after():
    fn, calls = _failing(1, retry_after=0.4)
    assert asyncio.run(retry_async(fn, RetrySettings(backoff_s=0.01), (BusyError,), "x")) == "ok"
    assert calls[1] - calls[0] >= 0.4


def test_the_episode_budget_stops_retries_before_the_request_tries_do():
    fn, calls = _failing(5)

    async def main():
        with episode_stats(NetStats(retry_budget=2)) as stats:
            with pytest.raises(BusyError):
                await retry_async(fn, RetrySettings(attempts=10, backoff_s=0.001), (BusyError,), "x")
            return stats

    stats = asyncio.run(main())
    assert len(calls) == 3 and stats.retries == 2 and stats.retry_budget == 0
