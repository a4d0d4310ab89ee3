"""The LLM user simulator over real HTTP: our OpenAI-compatible user server + oracle policy + real τ².

Covers concurrency (64 episodes against a user with 200 ms latency finish in about one episode's time),
retries, timeouts, non-retryable answers, empty answers, and telecom's user-side tools.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from slime_tau_plugin.tools.servers.fake_models import EchoModel
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, slime_args
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants


@pytest.fixture
def user_server():
    started: list[ChatUserServer] = []

    def start(**kwargs) -> ChatUserServer:
        server = ChatUserServer(**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def llm_args(policy_server, tokenizer_dir, user: ChatUserServer, **extra):
    return slime_args(
        policy_server,
        tokenizer_dir,
        tau_user="llm",
        tau_user_base_url=user.base_url,
        tau_user_model="scripted-user",
        **extra,
    )


async def _timed(args, sample) -> float:
    t0 = time.perf_counter()
    await generate(args, sample, SAMPLING)
    return time.perf_counter() - t0


def test_64_concurrent_episodes_wait_on_the_user_together(tau2_backend, qwen25, qwen25_dir, user_server):
    """Each episode: 3 policy turns, 4 user calls of 200 ms (opening, 2 answers, stop) = >= 0.8 s alone."""
    policy = SGLangServer(EchoModel(qwen25)).start()
    user = user_server(latency_s=0.2, max_replies=2)
    args = llm_args(policy, qwen25_dir, user, tau_domain="retail", tau_split="train", tau_user_timeout_s=30.0)
    samples = make_samples(tau2_backend, "retail", "train", 64)

    async def run_all():
        t0 = time.perf_counter()
        durations = await asyncio.gather(*[_timed(args, s) for s in samples])
        return time.perf_counter() - t0, durations

    try:
        wall, durations = asyncio.run(run_all())
    finally:
        policy.stop()
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.COMPLETED, sample.metadata.get("error")
        assert sample.metadata["num_turns"] == 3
    print(f"64 episodes: wall {wall:.2f}s, longest {max(durations):.2f}s, sum {sum(durations):.1f}s")
    assert len(user.requests) == 4 * len(samples)  # none retried
    assert sum(durations) >= 0.8 * len(samples)  # > 51 s one after another
    # About the longest episode (CPU work of 64 episodes on 2 cores stretches each of them alike).
    assert wall < 1.3 * max(durations) + 1.0, (wall, max(durations))
    assert wall < sum(durations) / 10, (wall, sum(durations))


def test_user_failures_are_retried_then_the_episode_completes(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, user_server, monkeypatch
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = user_server(fail_first=2, fail_status=503)
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    monkeypatch.setenv("TEST_USER_KEY", "sk-test-123")
    args = llm_args(
        policy,
        qwen25_dir,
        user,
        tau_domain="retail",
        tau_split="train",
        tau_user_retries=3,
        tau_user_api_key_env="TEST_USER_KEY",
    )
    asyncio.run(generate(args, sample, SAMPLING))
    assert sample.status is Sample.Status.COMPLETED
    assert sample.reward == 1.0
    assert len(user.requests) == 2 + 2  # two failures, then the opening and the stop
    assert {h.get("Authorization", h.get("authorization")) for h in user.request_headers} == {"Bearer sk-test-123"}
    assert "sk-test-123" not in json.dumps(sample.metadata)


@pytest.mark.parametrize(
    ("server_kwargs", "extra", "expected_requests", "message"),
    [
        ({"fail_first": 99, "fail_status": 500}, {"tau_user_retries": 3}, 3, "answered 500"),
        ({"fail_first": 99, "fail_status": 400}, {"tau_user_retries": 3}, 1, "answered 400"),
        ({"latency_s": 1.0}, {"tau_user_retries": 2, "tau_user_timeout_s": 0.2}, 2, "timed out"),
        ({"empty": True}, {"tau_user_retries": 3}, 3, "empty message (after 3 tries)"),
    ],
    ids=["5xx-after-retries", "4xx-not-retried", "timeout", "empty-answer"],
)
def test_a_failing_user_fails_the_sample_not_the_run(
    tau2_backend,
    qwen25,
    qwen25_dir,
    oracle_server_factory,
    user_server,
    server_kwargs,
    extra,
    expected_requests,
    message,
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = user_server(**server_kwargs)
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    args = llm_args(policy, qwen25_dir, user, tau_domain="retail", tau_split="train", **extra)
    asyncio.run(generate(args, sample, SAMPLING))
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.FAILED
    assert sample.remove_sample is True and sample.reward == 0.0
    assert sample.metadata["termination_reason"] == "user_error"
    assert message in sample.metadata["error"]
    assert len(user.requests) == expected_requests


def test_telecom_user_runs_its_device_tools_through_the_environment(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, user_server
):
    """The only telecom train task whose instruction is unique (the oracle needs to recognise it)."""
    refs = tau2_backend.task_refs("telecom", "train")
    scripts = {ref.task_id: tau2_backend.script(ref) for ref in refs}
    texts = [s.user_instructions.strip() for s in scripts.values()]
    unique = [
        ref
        for ref in refs
        if texts.count(scripts[ref.task_id].user_instructions.strip()) == 1
        and any(a.requestor == "user" for a in scripts[ref.task_id].gold_actions)
    ]
    assert unique, "expected a telecom train task with a unique instruction and user-side actions"
    ref = unique[0]
    policy = oracle_server_factory(qwen25, (("telecom", "train"),))
    user = user_server()
    sample = make_samples(tau2_backend, "telecom", "train", len(refs))[refs.index(ref)]
    args = llm_args(policy, qwen25_dir, user, tau_domain="telecom", tau_split="train")
    asyncio.run(generate(args, sample, SAMPLING))
    assert_sample_invariants(sample)
    assert sample.reward == 1.0, sample.metadata["reward_info"]
    user_calls = [
        call["function"]["name"]
        for body in user.requests
        for m in body["messages"]
        for call in (m.get("tool_calls") or [])
    ]
    expected = [a.name for a in scripts[ref.task_id].gold_actions if a.requestor == "user"]
    assert set(expected) <= set(user_calls)
    assert user.requests[0]["tools"], "the telecom user is offered its device tools"


def test_a_seeded_episode_sends_its_seed_to_the_user_endpoint(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, user_server
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = user_server()
    args = llm_args(policy, qwen25_dir, user, tau_domain="retail", tau_split="train")
    seeded, plain = make_samples(tau2_backend, "retail", "train", 2)
    asyncio.run(generate(args, seeded, {**SAMPLING, "sampling_seed": 1234567}))
    assert seeded.status is Sample.Status.COMPLETED and seeded.reward == 1.0
    assert user.requests and {body.get("seed") for body in user.requests} == {1234567}
    sent = len(user.requests)
    asyncio.run(generate(args, plain, SAMPLING))
    assert len(user.requests) > sent and all("seed" not in body for body in user.requests[sent:])
