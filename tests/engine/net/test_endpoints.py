"""``endpoints.py``: the registry keeps each caller's settings, and the breaker is driven only through the
guard's own methods (``retry.py``'s loop against a call that fails on purpose, no HTTP)."""

from __future__ import annotations

import asyncio
import time

import pytest

from slime_tau_plugin.engine.errors import EndpointDownError, EpisodeDeadlineError, TauPluginError
from slime_tau_plugin.engine.net.endpoints import EndpointRegistry, EndpointRole, GuardSettings
from slime_tau_plugin.engine.net.retry import RetrySettings, guarded_call, retry_async
from slime_tau_plugin.engine.net.stats import NetStats, episode_stats

FAST = RetrySettings(attempts=2, backoff_s=0.01, max_backoff_s=0.02)


class DownError(Exception):
    pass


class Endpoint:
    """A call that answers until ``down`` is set, counting the calls it got."""

    def __init__(self) -> None:
        self.down = False
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.down:
            raise DownError("connection refused")
        return "ok"


def test_a_second_caller_with_other_settings_gets_its_own_guard_never_the_first_ones():
    registry = EndpointRegistry()
    bounded = registry.guard_for(EndpointRole.POLICY, "http://router:30000/", GuardSettings(8, 60.0))
    unbounded = registry.guard_for(EndpointRole.POLICY, "http://router:30000", GuardSettings(None, 60.0))
    assert bounded is not unbounded
    assert bounded.settings == GuardSettings(8, 60.0) and unbounded.settings == GuardSettings(None, 60.0)
    assert registry.guard_for(EndpointRole.POLICY, "http://router:30000", GuardSettings(8, 60.0)) is bounded
    assert registry.guard_for(EndpointRole.USER, "http://router:30000", GuardSettings(8, 60.0)) is not bounded


def test_a_pre_flight_answer_reaches_guards_built_before_and_after_it_and_forget_clears_it():
    registry = EndpointRegistry()
    before = registry.guard_for(EndpointRole.USER, "http://user/v1", GuardSettings())
    registry.note_answered(EndpointRole.USER, "http://user/v1/")
    after = registry.guard_for(EndpointRole.USER, "http://user/v1", GuardSettings(4))
    assert before.has_answered and after.has_answered
    assert not registry.guard_for(EndpointRole.POLICY, "http://user/v1", GuardSettings()).has_answered
    registry.forget_history()
    assert not before.has_answered and not after.has_answered


def test_each_kind_of_fault_is_warned_about_once_per_registry():
    registry = EndpointRegistry()
    assert registry.first_warning(("policy /generate", "PolicyConnectionError"))
    assert not registry.first_warning(("policy /generate", "PolicyConnectionError"))
    assert registry.first_warning(("policy /generate", "PolicyHTTPError"))


def test_an_outage_is_waited_out_then_the_breaker_opens_and_refuses_without_calling():
    registry = EndpointRegistry()
    guard = registry.guard_for(EndpointRole.USER, "http://user", GuardSettings(outage_tolerance_s=0.3))
    endpoint = Endpoint()

    async def main() -> NetStats:
        assert await retry_async(endpoint, FAST, (DownError,), "user", guard) == "ok"  # it has answered
        endpoint.down = True
        with episode_stats(NetStats()) as stats:
            t0 = time.monotonic()
            with pytest.raises(EndpointDownError, match="user simulator endpoint http://user is down") as info:
                await retry_async(endpoint, FAST, (DownError,), "user", guard)
            assert time.monotonic() - t0 >= 0.3  # waited out the tolerance, then gave up
            assert isinstance(info.value.__cause__, DownError)
        calls = endpoint.calls
        with pytest.raises(EndpointDownError):  # open: refused at once, the endpoint is not asked
            await retry_async(endpoint, FAST, (DownError,), "user", guard)
        assert endpoint.calls == calls
        return stats

    stats = asyncio.run(main())
    assert stats.outage_wait_s > 0 and stats.retries == 1
    assert registry.breaker_openings() == {"user simulator http://user": 1}


def test_an_endpoint_that_never_answered_fails_after_its_own_tries():
    guard = EndpointRegistry().guard_for(EndpointRole.POLICY, "http://nowhere", GuardSettings(outage_tolerance_s=60))
    endpoint = Endpoint()
    endpoint.down = True
    with pytest.raises(DownError):
        asyncio.run(retry_async(endpoint, FAST, (DownError,), "policy", guard))
    assert endpoint.calls == FAST.attempts


def test_a_request_failing_alone_while_requests_sent_after_it_are_answered_fails_after_its_own_tries():
    guard = EndpointRegistry().guard_for(EndpointRole.USER, "http://user", GuardSettings(outage_tolerance_s=60))
    live, broken = Endpoint(), Endpoint()
    broken.down = True

    async def main() -> NetStats:
        await retry_async(live, FAST, (DownError,), "user", guard)  # it has answered
        with episode_stats(NetStats()) as stats:
            lonely = asyncio.create_task(retry_async(broken, FAST, (DownError,), "user", guard))
        while not lonely.done():  # others are answered every millisecond, sent after its first failure
            await retry_async(live, FAST, (DownError,), "user", guard)
            await asyncio.sleep(0.001)
        with pytest.raises(DownError):
            await lonely
        return stats

    stats = asyncio.run(main())
    assert broken.calls == FAST.attempts and stats.outage_wait_s == 0


def test_only_an_answer_to_a_request_sent_after_the_first_failure_ends_an_outage():
    """An answer to an older request may have left before the server went down (#25: the onset race)."""
    guard = EndpointRegistry().guard_for(EndpointRole.USER, "http://user", GuardSettings(outage_tolerance_s=60))
    guard.record_success(time.monotonic())  # it has answered
    sent_before = time.monotonic()
    guard.record_failure(DownError("refused"))
    first_failure = time.monotonic()

    async def wait_out() -> float | None:
        return await guard.wait_out(first_failure, DownError("refused"), 0.001, asyncio.sleep)

    guard.record_success(sent_before)
    assert asyncio.run(wait_out()) == 0.001  # still an outage: this request waits
    guard.record_success(time.monotonic())
    assert asyncio.run(wait_out()) is None  # a fresh answer: the failure is the request's own


def test_the_judges_guarded_call_tries_once_per_admission_and_waits_out_an_outage():
    guard = EndpointRegistry().guard_for(EndpointRole.JUDGE, "judge", GuardSettings(outage_tolerance_s=60))
    endpoint = Endpoint()

    async def main() -> None:
        endpoint.down = True
        with pytest.raises(DownError):  # never answered: one try, its own error
            await guarded_call(endpoint, guard, DownError, "judge")
        assert endpoint.calls == 1
        endpoint.down = False
        assert await guarded_call(endpoint, guard, DownError, "judge") == "ok"
        endpoint.down = True
        # an outage now: waited out (a first wait of at most 0.5s, then one more try) until the deadline
        with episode_stats(NetStats(deadline=time.monotonic() + 0.6)) as stats:
            with pytest.raises(EpisodeDeadlineError):
                await guarded_call(endpoint, guard, DownError, "judge")
        assert endpoint.calls == 4 and stats.outage_wait_s > 0 and stats.retries == 0

    asyncio.run(main())


def test_endpoint_errors_are_in_the_one_tree():
    assert issubclass(EndpointDownError, TauPluginError) and issubclass(EpisodeDeadlineError, TauPluginError)
