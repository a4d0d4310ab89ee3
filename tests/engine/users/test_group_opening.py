"""A GRPO group faces the same customer (``tau_user_shared_opening``), and a deterministic customer's requests are
answered from the exact-request cache (``tau_user_cache_size``): our user server counts what was saved, over real
HTTP with our policy server and real τ² episodes, every sample's tokens still exact.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.reporting.user_share import user_share_metrics
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply
from slime_tau_plugin.tools.servers.fake_models import EchoModel
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, requests_of
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants, assert_tito
from tests.slime_args import slime_args

GROUPS, PER_GROUP = 2, 4


@pytest.fixture(scope="module")
def policy(qwen25):
    server = SGLangServer(EchoModel(qwen25)).start()
    yield server
    server.stop()


def _varied_customer():
    """A customer whose every opening differs (an LLM at temperature > 0 would): it numbers its calls."""
    calls = itertools.count()

    def reply(messages, tools):
        message = scripted_user_reply(messages, tools, max_replies=0)
        if not any(m.get("role") == "assistant" for m in messages):
            message = {**message, "content": f"{message['content']} (caller {next(calls)})"}
        return message

    return reply


def _openings(user: ChatUserServer) -> list[dict]:
    return [r for r in user.requests if not any(m.get("role") == "assistant" for m in r["messages"])]


def _grouped_samples(tau2_backend) -> list:
    """``GROUPS`` tasks, ``PER_GROUP`` samples each, numbered as slime's data source numbers them."""
    samples = []
    for copy in range(PER_GROUP):
        for group, sample in enumerate(make_samples(tau2_backend, "retail", "train", GROUPS)):
            sample.group_index = group
            sample.index = copy
            samples.append(sample)
    return samples


def _play_groups(tau2_backend, policy, qwen25_dir, *, shared: bool) -> tuple[list, ChatUserServer]:
    user = ChatUserServer(reply=_varied_customer()).start()
    args = slime_args(
        policy,
        qwen25_dir,
        tau_domain="retail",
        tau_user="llm",
        tau_user_base_url=user.base_url,
        tau_user_model="customer",
        tau_user_shared_opening=shared,
    )
    samples = _grouped_samples(tau2_backend)

    async def run_all():  # as slime does: every sample of a step at once, each with its group seed
        params = [{**SAMPLING, "sampling_seed": 1234 + s.index} for s in samples]
        await asyncio.gather(*(generate(args, s, p) for s, p in zip(samples, params, strict=True)))

    try:
        asyncio.run(run_all())
    finally:
        user.stop()
    for sample in samples:
        assert_sample_invariants(sample)
        assert_tito(sample, requests_of(policy, sample))
        assert sample.status is not Sample.Status.FAILED, sample.metadata.get("error")
    return samples, user


def _first_user_message(sample) -> str:
    return next(m["content"] for m in sample.metadata["messages"] if m["role"] == "user")


def _prompt(sample) -> list[int]:
    return sample.tokens[: len(sample.tokens) - sample.response_length]


def test_a_group_shares_one_customer_opening_and_every_sample_stays_exact(tau2_backend, policy, qwen25_dir):
    samples, user = _play_groups(tau2_backend, policy, qwen25_dir, shared=True)
    assert len(_openings(user)) == GROUPS  # one opening request per group
    for group in range(GROUPS):
        mine = [s for s in samples if s.group_index == group]
        assert len({_first_user_message(s) for s in mine}) == 1
        assert len({tuple(_prompt(s)) for s in mine}) == 1  # the same prompt ids for the whole group
    assert _first_user_message(samples[0]) != _first_user_message(samples[1])  # groups still differ
    assert all(r.get("seed") in {1234 + c for c in range(PER_GROUP)} for r in user.requests)  # seeds reach the user
    metrics = user_share_metrics([s.metadata for s in samples])
    assert metrics["tau_user/shared_opening_requests"] == GROUPS
    assert metrics["tau_user/shared_opening_reused"] == GROUPS * (PER_GROUP - 1)
    print(f"shared opening on: {len(user.requests)} user requests, {len(_openings(user))} openings")

    samples, user = _play_groups(tau2_backend, policy, qwen25_dir, shared=False)
    assert len(_openings(user)) == GROUPS * PER_GROUP  # off: each sample asks its own
    assert len({_first_user_message(s) for s in samples if s.group_index == 0}) == PER_GROUP
    assert user_share_metrics([s.metadata for s in samples]) == {}
    print(f"shared opening off: {len(user.requests)} user requests, {len(_openings(user))} openings")


def test_a_deterministic_customer_is_answered_from_the_cache(tau2_backend, policy, qwen25_dir):
    user = ChatUserServer(max_replies=1).start()

    def args(**extra):
        return slime_args(
            policy,
            qwen25_dir,
            tau_domain="retail",
            tau_user="llm",
            tau_user_base_url=user.base_url,
            tau_user_model="customer",
            tau_user_cache_size=64,
            **extra,
        )

    async def one_by_one(config, seeds):  # in turn: each episode finds what the ones before it stored
        samples = []
        for seed in seeds:
            sample = make_samples(tau2_backend, "retail", "train", 1)[0]
            params = SAMPLING if seed is None else {**SAMPLING, "sampling_seed": seed}
            samples.append(await generate(config, sample, params))
        return samples

    try:
        greedy = asyncio.run(one_by_one(args(), [None, None, None]))
        sent_greedy = len(user.requests)
        seeded = asyncio.run(one_by_one(args(tau_user_temperature=0.7), [7, 8, 7]))
        sent_seeded = len(user.requests) - sent_greedy
        sampled = asyncio.run(one_by_one(args(tau_user_temperature=0.7), [None, None]))
    finally:
        user.stop()
    for sample in greedy + seeded + sampled:
        assert_sample_invariants(sample)
        assert_tito(sample, requests_of(policy, sample))
    per_episode = greedy[0].metadata["user_cache_misses"]
    assert per_episode >= 2 and greedy[0].metadata["user_cache_hits"] == 0
    assert sent_greedy == per_episode  # the 2nd and 3rd episodes asked the same requests: all answered here
    metrics = user_share_metrics([s.metadata for s in greedy])
    assert metrics["tau_user/cache_hits"] == 2 * per_episode and metrics["tau_user/cache_hit_rate"] == 2 / 3
    assert [s.metadata["user_cache_hits"] for s in seeded] == [0, 0, per_episode]  # seed 7 again: cached
    assert sent_seeded == 2 * per_episode
    assert all(r["seed"] in (7, 8) for r in user.requests[sent_greedy : sent_greedy + sent_seeded])
    assert all("user_cache_hits" not in s.metadata for s in sampled)  # temperature > 0 without a seed: never cached
    assert [s.metadata["user_requests"] for s in sampled] == [per_episode, per_episode]
    assert _first_user_message(greedy[1]) == _first_user_message(greedy[0])
    print(f"cache: {sent_greedy} requests for 3 greedy episodes of {per_episode} user turns each")
