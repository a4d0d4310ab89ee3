"""Outages cost time, not samples (#18): real servers stopped and restarted on the same port mid-run.

- a user-simulator outage shorter than ``tau_outage_tolerance_s`` loses no sample (the wait is in metadata);
- a longer one opens the breaker: in-flight episodes FAIL naming the endpoint, new ones FAIL at once, and
  the first success after the endpoint is back closes it;
- a request whose tries run out as an outage begins waits it out, even when an answer to a request sent
  before it is read after its first failure;
- ``tau_user_max_inflight`` bounds what reaches the server, and the slot wait is not charged to a
  request's timeout;
- ``tau_episode_timeout_s`` ends a slow episode as ``deadline`` (TRUNCATED, not trained on, removed);
- ``tau_retry_budget`` bounds the retries one episode spends;
- a script that calls ``generate`` and exits leaves no unclosed aiohttp session behind.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.config.tau_config import LLMEndpoint
from slime_tau_plugin.engine.net.endpoints import (
    PROBE_INTERVAL_S,
    EndpointRegistry,
    EndpointRole,
    GuardSettings,
)
from slime_tau_plugin.engine.net.stats import NetStats, episode_stats
from slime_tau_plugin.engine.users.chat_client import ChatClient
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, slime_args
from tests.conftest import ROOT
from tests.contracts.slime_sample import Sample
from tests.engine.users.test_llm_user import llm_args
from tests.invariants import assert_sample_invariants
from tests.server_faults import FailingModel


def _llm_args(policy, tokenizer_dir, user: ChatUserServer, **extra):
    return llm_args(policy, tokenizer_dir, user, tau_domain="retail", tau_split="train", **extra)


class _Outage:
    """Stops a user server ``after_s`` after its first request arrived (with ``after_answer``; else ``after_s`` after
    the start) and starts a new one on the same port ``for_s`` later.

    Counting from the first request, not from the start, keeps the outage where the test means it, in the middle of
    the episodes, however long this process takes to build its resources before the first episode talks (an
    endpoint that never answered is not waited for, by design: see ``endpoints.py``).
    """

    def __init__(
        self, user: ChatUserServer, *, after_s: float, for_s: float | None, after_answer: bool = True, **server_kwargs
    ) -> None:
        self.user, self.after_s, self.for_s, self.kwargs = user, after_s, for_s, server_kwargs
        self.after_answer = after_answer
        self.restarted: ChatUserServer | None = None
        self.stopped_at = self.restarted_at = 0.0

    async def run(self) -> None:
        while self.after_answer and not self.user.requests:
            await asyncio.sleep(0.01)
        await asyncio.sleep(self.after_s)
        await asyncio.to_thread(self.user.stop)
        self.stopped_at = time.monotonic()
        if self.for_s is None:
            return
        await asyncio.sleep(self.for_s)
        self.restarted = ChatUserServer(port=_port(self.user), **self.kwargs).start()
        self.restarted_at = time.monotonic()

    def stop(self) -> None:
        if self.restarted is not None:
            self.restarted.stop()


def _port(server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _play(args, samples, *during) -> None:
    async def main():
        await asyncio.gather(*(generate(args, s, SAMPLING) for s in samples), *during)

    asyncio.run(main())


def test_a_user_outage_shorter_than_the_tolerance_loses_no_sample(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = ChatUserServer(latency_s=0.4, max_replies=6).start()  # each episode talks for > 3 s
    outage = _Outage(user, after_s=1.0, for_s=3.0, latency_s=0.4, max_replies=6)
    args = _llm_args(policy, qwen25_dir, user, tau_user_retries=2, tau_outage_tolerance_s=30.0)
    samples = make_samples(tau2_backend, "retail", "train", 8)
    try:
        _play(args, samples, outage.run())
    finally:
        outage.stop()
    assert outage.restarted is not None and outage.restarted.requests  # the episodes went on after it
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.COMPLETED, sample.metadata.get("error")
        assert sample.reward == 1.0
    waits = [s.metadata["outage_wait_s"] for s in samples]
    assert max(waits) > 0, waits  # someone waited the outage out, and said so
    assert all(s.metadata["user_requests"] >= 2 for s in samples)


@pytest.mark.serial  # asserts an open breaker answers within 1 s of wall clock
def test_a_longer_outage_fails_fast_naming_the_endpoint_and_the_first_success_closes_the_breaker(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = ChatUserServer(latency_s=0.2, max_replies=3).start()
    port = _port(user)
    args = _llm_args(policy, qwen25_dir, user, tau_user_retries=2, tau_outage_tolerance_s=1.5)
    first = make_samples(tau2_backend, "retail", "train", 4)
    _play(args, first, _Outage(user, after_s=0.3, for_s=None).run())  # past the first answer (0.2 s)
    for sample in first:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.FAILED
        assert f"user simulator endpoint http://127.0.0.1:{port}/v1 is down" in sample.metadata["error"]
        assert sample.remove_sample

    later = make_samples(tau2_backend, "retail", "train", 4)
    t0 = time.monotonic()
    _play(args, later)
    assert time.monotonic() - t0 < 1.0  # the breaker is open: no waiting, no retries
    assert all("is down" in s.metadata["error"] and s.metadata["net_retries"] == 0 for s in later)

    back = ChatUserServer(port=port, latency_s=0.0, max_replies=3).start()
    try:
        time.sleep(PROBE_INTERVAL_S)  # the next request is the breaker's probe
        again = make_samples(tau2_backend, "retail", "train", 3)
        _play(args, again)
    finally:
        back.stop()
    assert [s.status for s in again] == [Sample.Status.COMPLETED] * 3, [s.metadata.get("error") for s in again]


def test_a_request_whose_tries_end_at_an_outages_onset_waits_it_out_though_an_older_request_succeeds():
    """#25 item 4, the onset race: request A fails as the outage begins, then request B, sent *before* the
    outage, is answered. B's answer must not restart the outage clock after A's first failure: A spends its
    3 tries, waits (``outage_wait_s``) instead of failing, and its next try gets the server back.

    The outage is the server dropping every new connection (``refuse``) for exactly A's 3 tries while it
    finishes B, whose reply is held until A has failed twice (a server going down with answers in flight)."""
    held = _HeldReply()
    user = ChatUserServer(reply=held).start()
    guard = EndpointRegistry().guard_for(EndpointRole.USER, user.base_url, GuardSettings(outage_tolerance_s=30.0))
    client = ChatClient(LLMEndpoint(user.base_url, "scripted-user", timeout_s=10.0, retries=3), guard=guard)
    outage = FaultInjector(FaultSpec.parse("refuse:1.0@3"), "user")

    async def request_a() -> tuple[dict, NetStats]:
        with episode_stats(NetStats()) as stats:
            return await client.complete([{"role": "user", "content": "a"}]), stats

    async def main() -> tuple[dict, NetStats, int]:
        try:
            await client.complete([{"role": "user", "content": "hi"}])  # the endpoint has answered
            b = asyncio.create_task(client.complete([{"role": "user", "content": _HeldReply.HOLD}]))
            while not held.waiting.is_set():
                await asyncio.sleep(0.01)
            user.faults = outage  # B is in the server's hands; every new request is dropped from now on
            a = asyncio.create_task(request_a())
            while outage.counts()["refuse"] < 2 and not a.done():  # A's first failure is recorded
                await asyncio.sleep(0.01)
            held.release.set()
            await b  # its success is recorded after A's first failure
            refused_before_b = outage.counts()["refuse"]
            answer, stats = await a
            return answer, stats, refused_before_b
        finally:
            await client.aclose()

    try:
        answer, stats, refused_before_b = asyncio.run(main())
    finally:
        user.stop()
    assert refused_before_b == 2  # B was answered between A's 2nd and 3rd (last) try: the race this test is about
    assert answer["content"] == "ok"
    assert outage.counts()["refuse"] == 3 and stats.retries == 2  # its own tries were spent, then it waited
    assert stats.outage_wait_s > 0


class _HeldReply:
    """A user reply of ``ok``; the request whose last message is ``HOLD`` waits (in the server) until released."""

    HOLD = "hold"

    def __init__(self) -> None:
        self.waiting, self.release = threading.Event(), threading.Event()

    def __call__(self, messages, tools) -> dict:
        if messages[-1]["content"] == self.HOLD:
            self.waiting.set()
            self.release.wait(10)
        return {"role": "assistant", "content": "ok"}


def test_in_flight_requests_are_bounded_and_the_slot_wait_is_not_a_timeout(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    in_flight = _InFlight(latency_s=0.25, max_replies=1)
    user = ChatUserServer(reply=in_flight).start()
    args = _llm_args(policy, qwen25_dir, user, tau_user_max_inflight=2, tau_user_timeout_s=1.0, tau_user_retries=1)
    samples = make_samples(tau2_backend, "retail", "train", 8)
    try:
        _play(args, samples)
    finally:
        user.stop()
    for sample in samples:
        assert sample.status is Sample.Status.COMPLETED, sample.metadata.get("error")
        assert sample.metadata["net_retries"] == 0  # nobody timed out waiting for a slot
    assert in_flight.peak == 2
    # 8 episodes x 3 user calls x 0.25 s through 2 slots: ~3 s, far above the 1 s request timeout
    assert sum(s.metadata["slot_wait_s"] for s in samples) > 2.0


class _InFlight:
    """The scripted user's reply, slow, counting how many the server is answering at once."""

    def __init__(self, *, latency_s: float, max_replies: int) -> None:
        self.latency_s, self.max_replies = latency_s, max_replies
        self.open = self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, messages, tools) -> dict:
        with self._lock:
            self.open += 1
            self.peak = max(self.peak, self.open)
        try:
            time.sleep(self.latency_s)
            return scripted_user_reply(messages, tools, self.max_replies)
        finally:
            with self._lock:
                self.open -= 1


@pytest.mark.serial  # asserts the episode ends within a turn or two of its deadline (wall clock)
def test_an_episode_past_its_deadline_ends_truncated_and_is_not_trained_on(tau2_backend, qwen25, qwen25_dir):
    from slime_tau_plugin.tools.servers.fake_models import EchoModel

    # turns of 1 s against a 3 s deadline: a loaded box adds its CPU time to each turn (the first loads τ's data)
    latency, deadline = 1.0, 3.0
    policy = SGLangServer(EchoModel(qwen25), latency_s=latency).start()
    try:
        args = slime_args(
            policy, qwen25_dir, tau_episode_timeout_s=deadline, tau_scripted_user_replies=20, tau_domain="retail"
        )
        sample = make_samples(tau2_backend, "retail", "train", 1)[0]
        t0 = time.monotonic()
        asyncio.run(generate(args, sample, SAMPLING))
        wall = time.monotonic() - t0
    finally:
        policy.stop()
    assert_sample_invariants(sample)
    assert sample.metadata["termination_reason"] == "deadline"
    assert sample.status is Sample.Status.TRUNCATED
    assert sample.remove_sample and sample.reward == 0.0
    assert not any(sample.loss_mask)
    assert deadline <= wall < deadline + 2 * latency + 1.0  # ended at the first turn boundary past the deadline
    assert 2 <= sample.metadata["num_turns"] <= 4


def test_the_retry_budget_bounds_one_episodes_retries(tau2_backend, qwen25, qwen25_dir):
    policy = SGLangServer(FailingModel(qwen25, 503, "busy", failures=3)).start()
    try:
        tight = slime_args(policy, qwen25_dir, tau_policy_retries=5, tau_retry_budget=1)
        sample = make_samples(tau2_backend, "retail", "train", 1)[0]
        asyncio.run(generate(tight, sample, SAMPLING))
    finally:
        policy.stop()
    assert sample.status is Sample.Status.FAILED
    assert "answered 503" in sample.metadata["error"]
    assert sample.metadata["net_retries"] == 1


def test_a_script_that_calls_generate_exits_without_unclosed_sessions(oracle_server_factory, qwen25, qwen25_dir):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    script = textwrap.dedent(
        f"""
        import asyncio, gc
        from types import SimpleNamespace
        from slime_tau_plugin.adapters.slime.generate import generate
        from tests.contracts.slime_sample import Sample

        args = SimpleNamespace(tau_policy_url={policy.url!r}, tau_tokenizer_path={str(qwen25_dir)!r},
                               tau_domain="retail", tau_split="train")
        sample = Sample(prompt="", metadata={{"domain": "retail", "split": "train", "task_id": "0"}})
        asyncio.run(generate(args, sample, {{"temperature": 0.0, "max_new_tokens": 512}}))
        print(sample.status.name)
        gc.collect()
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "COMPLETED"
    for noise in ("Unclosed client session", "Unclosed connector", "Exception ignored"):
        assert noise not in done.stderr, done.stderr[-2000:]


def test_a_user_server_seen_by_a_pre_flight_check_is_waited_for_from_the_first_request(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    """The CLI's pre-flight saw the user answer (``note_answered``); it restarts before any episode's request
    succeeded: the episodes wait for it instead of failing after their tries (found in a fresh-clone walk)."""
    from slime_tau_plugin.engine.net.endpoints import EndpointRole, note_answered

    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = ChatUserServer(max_replies=1).start()
    note_answered(EndpointRole.USER, user.base_url)
    outage = _Outage(user, after_s=0.0, for_s=2.0, after_answer=False, max_replies=1)
    args = _llm_args(policy, qwen25_dir, user, tau_user_retries=2, tau_outage_tolerance_s=30.0)
    samples = make_samples(tau2_backend, "retail", "train", 2)

    async def main():
        stop = asyncio.create_task(outage.run())
        await asyncio.sleep(0.3)  # the server is down before the first request
        await asyncio.gather(*(generate(args, s, SAMPLING) for s in samples), stop)

    try:
        asyncio.run(main())
    finally:
        outage.stop()
    assert [s.status for s in samples] == [Sample.Status.COMPLETED] * 2, [s.metadata.get("error") for s in samples]
    assert all(s.metadata["outage_wait_s"] > 0 for s in samples)
