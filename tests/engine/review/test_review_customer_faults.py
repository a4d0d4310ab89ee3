"""A wrong customer (serve-user's customer faults) through ``generate``: real HTTP, real τ² retail, the oracle.

What the review does with each: a loop that runs the episode out is ``user_error`` (FAILED, removed, mask 0, same
tokens), an invented identifier no agent call uses and a customer who speaks as the agent in a passed episode are
minor (kept, marked), and a clean customer is not flagged.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from slime_tau_plugin.tools.servers.customer_faults import LOOP_LINE
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants
from tests.slime_args import slime_args


def play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, spec: str | None, **extra) -> Sample:
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    faults = FaultInjector(FaultSpec.parse(spec, seed=0), "user") if spec else None
    user = ChatUserServer(faults=faults, max_replies=1).start()
    try:
        args = slime_args(
            policy,
            qwen25_dir,
            tau_user="llm",
            tau_user_base_url=user.base_url,
            tau_user_model="scripted-user",
            tau_max_turns=10,
            **extra,
        )
        (sample,) = make_samples(tau2_backend, "retail", "train", 1)
        asyncio.run(generate(args, sample, SAMPLING))
    finally:
        user.stop()
    assert_sample_invariants(sample)
    return sample


def test_a_clean_customer_is_reviewed_and_not_flagged(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, None)
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0
    review = sample.metadata["tau_review"]
    assert review["findings"] == [] and "invented_identifier" in review["checks"]


def test_a_stuck_customer_makes_the_episode_user_error(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, "loop:1")
    meta = sample.metadata
    assert sample.status is Sample.Status.FAILED and sample.remove_sample and sample.reward == 0.0
    assert meta["termination_reason"] == "user_error" and meta["failed_endpoint"] == "customer"
    review = meta["tau_review"]
    assert review["excluded"] and review["severity"] == "critical_hindered"
    assert meta["messages"][review["message_index"]]["content"] == LOOP_LINE
    assert sum(sample.loss_mask) == 0 and len(sample.tokens) > sample.response_length


@pytest.mark.parametrize(
    ("spec", "check"), [("invented_id:1", "invented_identifier"), ("as_agent:1", "speaks_as_agent")]
)
def test_a_minor_customer_error_is_kept_and_marked(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, spec, check
):
    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, spec)
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0 and not sample.remove_sample
    review = sample.metadata["tau_review"]
    assert review["severity"] == "minor" and not review["excluded"]
    assert check in {f["check"] for f in review["findings"]}
    assert sum(sample.loss_mask) > 0


def test_the_ablation_key_keeps_a_critical_episode(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, "loop:1", tau_review_keep_flagged=True)
    assert sample.status is Sample.Status.TRUNCATED and not sample.remove_sample
    assert sample.metadata["tau_review"]["severity"] == "critical_hindered"
    assert not sample.metadata["tau_review"]["excluded"]


def judge_answer(messages: list[dict], tools: list[dict] | None) -> dict:
    """A judge that finds the customer's opening (message 1) ended things early: τ²'s JSON schema."""
    assert "<User Instructions>" in messages[-1]["content"] and "[1] User:" in messages[-1]["content"]
    error = {"turn_idx": 1, "error_tags": ["premature_termination"], "severity": "critical_hindered", "reasoning": "r"}
    return {"role": "assistant", "content": json.dumps({"errors": [error], "summary": "s"})}


def test_the_judge_rubric_decides_a_judged_episode(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    judge = ChatUserServer(reply=judge_answer).start()
    try:
        extra = {"tau_judge_base_url": judge.base_url, "tau_judge_model": "judge", "tau_review_judge_share": 1.0}
        sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, None, **extra)
        assert judge.requests.total == 1
    finally:
        judge.stop()
    review = sample.metadata["tau_review"]
    assert review["judged"] and review["judge_error"] is None and review["excluded"]
    assert review["findings"][0]["check"] == "judge" and review["findings"][0]["message_index"] == 1
    assert sample.metadata["failed_endpoint"] == "customer" and sample.status is Sample.Status.FAILED


def test_a_failed_judge_is_counted_never_a_pass(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    judge = ChatUserServer(fail_first=100, fail_status=400).start()
    try:
        extra = {"tau_judge_base_url": judge.base_url, "tau_judge_model": "judge", "tau_review_judge_share": 1.0}
        sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, None, **extra)
    finally:
        judge.stop()
    review = sample.metadata["tau_review"]
    assert not review["judged"] and "400" in review["judge_error"]
    assert sample.status is Sample.Status.COMPLETED  # the checks found nothing; the judge's failure is counted
