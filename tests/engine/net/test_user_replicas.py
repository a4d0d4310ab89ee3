"""Several LLM-user replicas over real HTTP (#26), and the LLM user's token budget (#27).

Our chat user servers + the oracle policy + real τ² retail, through slime's ``generate``:

- requests are balanced over the replicas by requests in flight: each gets its share, and says so in metadata;
- one replica dead from the start and another killed mid-run: every episode still COMPLETED, none lost;
- every replica dead: the single-endpoint behaviour (waited out, then FAILED naming the endpoint);
- the token budget: once spent, episodes end ``user_token_budget`` (TRUNCATED, not trained on, removed), the
  step's spend is in slime's metrics, and the next step plays again (per step) or not (per run).
"""

from __future__ import annotations

import logging
import socket

from slime_tau_plugin.adapters.slime.metrics import log_rollout
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from tests.adapters.slime.test_generate_e2e import make_samples
from tests.contracts.slime_sample import Sample
from tests.engine.net.test_outages import _llm_args, _Outage, _play
from tests.invariants import assert_sample_invariants


def _dead_url() -> str:
    """A URL nothing listens on (a port bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _replica_args(policy, tokenizer_dir, first: ChatUserServer, urls: str, **extra):
    args = _llm_args(policy, tokenizer_dir, first, **extra)
    args.tau_user_base_url = urls  # several replicas, comma-separated
    return args


def _completed(samples) -> None:
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.COMPLETED, sample.metadata.get("error")
        assert sample.reward == 1.0


def test_requests_are_balanced_over_two_replicas_by_requests_in_flight(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    a = ChatUserServer(latency_s=0.2, max_replies=2).start()
    b = ChatUserServer(latency_s=0.2, max_replies=2).start()
    try:
        args = _replica_args(policy, qwen25_dir, a, f"{a.base_url},{b.base_url}")
        samples = make_samples(tau2_backend, "retail", "train", 12)
        _play(args, samples)
    finally:
        a.stop()
        b.stop()
    _completed(samples)
    total = len(a.requests) + len(b.requests)
    assert total == sum(s.metadata["user_requests"] for s in samples)  # nothing retried
    assert min(len(a.requests), len(b.requests)) >= 0.3 * total, (len(a.requests), len(b.requests))
    per_replica = {}
    for sample in samples:
        for name, count in sample.metadata["replica_requests"].items():
            per_replica[name] = per_replica.get(name, 0) + count
    assert per_replica == {f"user {a.base_url}": len(a.requests), f"user {b.base_url}": len(b.requests)}


def test_one_replica_dead_and_one_killed_mid_run_lose_no_sample(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    live = ChatUserServer(latency_s=0.2, max_replies=3).start()
    doomed = ChatUserServer(latency_s=0.2, max_replies=3).start()
    urls = f"{live.base_url},{doomed.base_url},{_dead_url()}"
    args = _replica_args(policy, qwen25_dir, live, urls, tau_user_retries=2, tau_outage_tolerance_s=1.0)
    samples = make_samples(tau2_backend, "retail", "train", 8)
    try:
        _play(args, samples, _Outage(doomed, after_s=0.5, for_s=None).run())
    finally:
        live.stop()
    _completed(samples)
    assert doomed.requests and live.requests
    failures = sum(sum(s.metadata["replica_failures"].values()) for s in samples)
    assert failures >= 1  # the dead replicas were tried, and the requests went on elsewhere


def test_when_every_replica_is_down_episodes_fail_naming_the_endpoint(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    a = ChatUserServer(latency_s=0.2, max_replies=3).start()
    b = ChatUserServer(latency_s=0.2, max_replies=3).start()
    args = _replica_args(
        policy, qwen25_dir, a, f"{a.base_url},{b.base_url}", tau_user_retries=2, tau_outage_tolerance_s=1.0
    )
    samples = make_samples(tau2_backend, "retail", "train", 4)
    _play(args, samples, _Outage(a, after_s=0.3, for_s=None).run(), _Outage(b, after_s=0.3, for_s=None).run())
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.FAILED and sample.remove_sample
        assert sample.metadata["failed_endpoint"] == "user"
        assert "user simulator endpoint http://127.0.0.1:" in sample.metadata["error"]
        assert "is down" in sample.metadata["error"]


def test_a_spent_user_token_budget_ends_episodes_untrained_and_is_reported_per_step(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, caplog
):
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    user = ChatUserServer(max_replies=2).start()
    try:
        args = _llm_args(policy, qwen25_dir, user, tau_user_token_budget_per_step=1)
        first = make_samples(tau2_backend, "retail", "train", 2)
        for sample in first:  # one after the other: the first spends the step's budget on its opening
            _play(args, [sample])
        cut, refused = first
        for sample in first:
            assert_sample_invariants(sample)
            assert sample.metadata["termination_reason"] == "user_token_budget"
            assert sample.status is Sample.Status.TRUNCATED and sample.remove_sample
            assert not any(sample.loss_mask) and sample.reward == 0.0
            assert "tau_user_token_budget_per_step=1" in sample.metadata["error"]
        assert cut.metadata["user_requests"] == 1 and refused.metadata["user_requests"] == 0
        requests = len(user.requests)

        with caplog.at_level(logging.INFO, logger="slime_tau_plugin.adapters.slime.metrics"):
            log_rollout(0, args, first, None, 1.0)  # slime's step ends: its spend is reported
        metrics = next(r.args[2] for r in caplog.records if r.getMessage().startswith("tau metrics rollout"))
        spent = cut.metadata["user_prompt_tokens"] + cut.metadata["user_completion_tokens"]
        assert metrics["rollout/tau/user_tokens/step"] == spent == metrics["rollout/tau/user_tokens/total"]
        assert metrics["rollout/tau/user_tokens/refused"] == 2
        assert metrics["rollout/tau/tau2/retail/termination/user_token_budget"] == 1.0

        again = make_samples(tau2_backend, "retail", "train", 1)
        _play(args, again)  # a new step: the budget is there again
        assert again[0].metadata["user_requests"] == 1 and len(user.requests) == requests + 1

        args.tau_user_token_budget_total = 10**6  # a run budget far off changes nothing
        args.tau_user_token_budget_per_step = None
        whole = make_samples(tau2_backend, "retail", "train", 2)
        _play(args, whole)
    finally:
        user.stop()
    _completed(whole)
