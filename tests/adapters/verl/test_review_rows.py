"""The customer review and its cost under verl: ``TauAgentLoop``'s rows carry the verdict and what the customer cost
through verl's own padding and batch assembly, and the step's τ metrics count the ``user_error`` episodes the way
slime's do (``review/excluded``, ``tau/failed/customer``), with the customer's cost (``tau_user/cost_*``).

One group of one τ² retail task against real HTTP: two rows meet a clean customer (our chat server), one meets a
customer stuck in a loop (serve-user's ``loop`` fault), which runs the episode out of turns.
"""

from __future__ import annotations

from slime_tau_plugin.adapters.verl.episodes import episode_views, step_metrics, task_pass_k
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from tests.adapters.verl.conftest import refs_with_tasks, verl_config
from tests.adapters.verl.server_manager import HTTPServerManager
from tests.adapters.verl.test_tau_agent_loop import (
    assert_output_invariants,
    dataset_rows,
    make_loop,
    run_rows,
    verl_batch,
)


def customer(server: ChatUserServer):
    return verl_config(
        "+tau.user=llm", f"+tau.user_base_url={server.base_url}", "+tau.user_model=scripted-user", "+tau.max_turns=10"
    )


def test_verl_rows_carry_the_verdict_and_the_step_counts_customer_errors(tmp_path, tau2_backend, qwen25, oracle_server):
    clean = ChatUserServer(max_replies=1).start()
    stuck = ChatUserServer(max_replies=1, faults=FaultInjector(FaultSpec.parse("loop:1", seed=0), "user")).start()
    try:
        configs = (customer(clean), customer(clean), customer(stuck))
        manager = HTTPServerManager(oracle_server.url)
        row = dataset_rows(tmp_path, configs[0], qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))[0]
        outputs = [run_rows(lambda c=c: make_loop(c, manager, qwen25), [row])[0] for c in configs]
        served = clean.requests.total + stuck.requests.total
    finally:
        clean.stop()
        stuck.stop()
    for out, config in zip(outputs, configs, strict=True):
        assert_output_invariants(out, config)
    kept, lost = outputs[0].extra_fields, outputs[2].extra_fields
    assert kept["status"] == "completed" and kept["tau_review"]["findings"] == [] and not kept["tau_review"]["excluded"]
    assert lost["status"] == "failed" and lost["termination_reason"] == "user_error"
    assert lost["failed_endpoint"] == "customer" and sum(outputs[2].response_mask) == 0
    review = lost["tau_review"]
    assert review["excluded"] and review["severity"] == "critical_hindered"
    assert review["findings"][0]["check"] == "repeated_message"
    assert lost["reward_extra_info"]["customer_error"] == 1.0 and kept["reward_extra_info"]["customer_error"] == 0.0

    batch = verl_batch(configs[0], qwen25, outputs, [row] * 3)  # through verl's own padding and batching
    columns = batch.non_tensor_batch
    extras = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    assert [e["tau_review"]["excluded"] for e in extras] == [False, False, True]
    requests = sum(e["tau_user_cost"]["user"]["requests"] for e in extras)
    assert requests == served, "the rows' counters equal the customer servers' request counts"
    tau = step_metrics(episode_views(extras))
    where = "tau/tau2/retail/"
    assert tau[f"{where}review/excluded"] == 1.0 and tau["tau/failed/customer"] == 1 / 3
    assert tau[f"{where}review/reviewed"] == 1.0 and tau[f"{where}termination/user_error"] == 1 / 3
    assert tau[f"{where}tau_user/cost_requests_per_episode"] == served / 3
    assert 0.0 < tau[f"{where}tau_user/cost_wait_share"] <= 1.0
    val = task_pass_k([e["reward_extra_info"] for e in extras])
    assert val["tau_pass^2"] == 1.0, "the customer error is no evidence against the policy"
    assert val["tau_pass^3"] is None, "two episodes are evidence: pass^3 is not defined"
    assert [e["reward_extra_info"]["failed"] for e in extras] == [0.0, 0.0, 1.0]
