"""What the customer costs, counted where the requests are made: real HTTP to our chat servers, real τ² retail, the
oracle policy, through slime's ``generate``.

The episode's ``tau_user_cost`` must equal what the servers saw: every request the customer's server answered
(a failed try included) and every judge request, each on its own meter; the shares of wall time stay in [0, 1]; the
scripted customer costs nothing. The per-step metrics (``tau_user/cost_*``) read the same numbers.
"""

from __future__ import annotations

import asyncio
import json

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.adapters.slime.metrics import episode_metrics
from slime_tau_plugin.engine.episode.cost import COST_KEY, CustomerCost
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants
from tests.slime_args import slime_args


def clean_judge(messages: list[dict], tools: list[dict] | None) -> dict:
    """A judge that finds nothing: τ²'s review JSON with no errors."""
    return {"role": "assistant", "content": json.dumps({"errors": [], "summary": "the customer followed its script"})}


def play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, **extra) -> Sample:
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    args = slime_args(policy, qwen25_dir, tau_max_turns=10, **extra)
    (sample,) = make_samples(tau2_backend, "retail", "train", 1)
    asyncio.run(generate(args, sample, SAMPLING))
    assert_sample_invariants(sample)
    return sample


def test_the_customer_and_judge_counters_equal_the_servers_request_counts(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    user = ChatUserServer(max_replies=1, fail_first=1).start()  # the first try fails (500) and is retried
    judge = ChatUserServer(reply=clean_judge).start()
    try:
        sample = play(
            tau2_backend,
            qwen25,
            qwen25_dir,
            oracle_server_factory,
            tau_user="llm",
            tau_user_base_url=user.base_url,
            tau_user_model="scripted-user",
            tau_judge_base_url=judge.base_url,
            tau_judge_model="judge",
            tau_review_judge_share=1.0,
        )
        served, judged = user.requests.total, judge.requests.total
    finally:
        user.stop()
        judge.stop()
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0
    cost = CustomerCost.from_metadata(sample.metadata[COST_KEY])
    assert served >= 3 and cost.user.requests == served and cost.user.failed == 1
    assert cost.user.requests - cost.user.failed == sample.metadata["user_requests"]  # the answered ones
    assert cost.user.prompt_tokens == sample.metadata["user_prompt_tokens"] > 0
    assert judged == 1 and cost.judge.requests == 1 and cost.judge.failed == 0
    assert cost.judge.prompt_tokens > 0 and cost.judge.completion_tokens == 1
    assert cost.review_cpu_s > 0 and sample.metadata["tau_review"]["judged"]
    assert 0.0 < cost.user_wait_share <= 1.0 and 0.0 < cost.judge_wait_share <= 1.0
    assert cost.user.wait_s + cost.judge.wait_s <= cost.wall_s

    metrics = episode_metrics([sample], "rollout/tau/")
    where = "rollout/tau/tau2/retail/tau_user/cost_"
    assert metrics[f"{where}requests_per_episode"] == served
    assert metrics[f"{where}failed_requests_per_episode"] == 1
    assert metrics[f"{where}judge_requests_per_episode"] == judged
    assert 0.0 < metrics[f"{where}wait_share"] <= 1.0 and 0.0 < metrics[f"{where}judge_wait_share"] <= 1.0


def test_the_scripted_customer_costs_no_request(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory)
    cost = CustomerCost.from_metadata(sample.metadata[COST_KEY])
    assert sample.status is Sample.Status.COMPLETED
    assert cost.user.requests == cost.judge.requests == 0 and cost.user_wait_share == 0.0
    assert cost.wall_s > 0 and cost.review_cpu_s > 0  # the checks still ran: their CPU is the review's cost
