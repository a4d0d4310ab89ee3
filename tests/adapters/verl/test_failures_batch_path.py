"""A customer who never answers, through verl's own ``AgentLoopWorker`` and batch trainer code (``use_v1=false``).

The episode becomes a failed sample without an exception (valid weight versions, mask 0), is left out of its
group's advantages by ``tau_grpo`` run through verl's own ``compute_advantage``, is counted in the step's τ
metrics and in verl's ``tool_call_counts``, and enough of them stop the run with one line naming the customer.
"""

from __future__ import annotations

import asyncio
import socket

import numpy as np
import pytest
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
from verl.trainer.ppo.metric_utils import compute_data_metrics
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.dataset.rl_dataset import RLHFDataset

import slime_tau_plugin.adapters.verl.advantage  # noqa: F401  (registers tau_grpo, as VERL_USE_EXTERNAL_MODULES does)
from slime_tau_plugin.adapters.verl.episodes import episode_views, step_metrics
from slime_tau_plugin.adapters.verl.guard import reset_batch_path_guard
from slime_tau_plugin.reporting.failure_guard import FailureGuardError
from tests.adapters.verl.conftest import refs_with_tasks, verl_config
from tests.adapters.verl.server_manager import HTTPServerManager
from tests.adapters.verl.test_tau_agent_loop import (
    SAMPLING,
    assert_output_invariants,
    dataset_rows,
    make_loop,
    run_rows,
)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_customer(*more: str) -> tuple[str, ...]:
    """Overrides for an LLM customer at a port nothing listens on: it never answers."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    return ("+tau.user=llm", f"+tau.user_base_url={url}", "+tau.user_model=m", "+tau.user_retries=1", *more)


def test_dead_customer_is_a_failed_sample_left_out_of_grpo_and_counted(tmp_path, tau2_backend, qwen25, oracle_server):
    """One group of four samples of one task: two solve it, one is cut at 5 tokens, one meets a dead customer."""
    healthy, short, dead = verl_config(), verl_config("+tau.max_tokens_per_turn=5"), verl_config(*dead_customer())
    manager = HTTPServerManager(oracle_server.url)
    row = dataset_rows(tmp_path, healthy, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))[0]
    outputs = [run_rows(lambda c=c: make_loop(c, manager, qwen25), [row])[0] for c in (healthy, healthy, short, dead)]
    failed = outputs[3]
    assert_output_invariants(failed, dead)
    fields = failed.extra_fields
    assert fields["status"] == "failed" and fields["failed_endpoint"] == "user" and fields["model_turns"] == 0
    assert (fields["min_global_steps"], fields["max_global_steps"]) == (-1, -1), "valid ints with no turn"
    np.array([fields["min_global_steps"], fields["max_global_steps"]], dtype=int)  # what V1 does every step
    assert [o.reward_score for o in outputs] == [1.0, 1.0, 0.0, 0.0]

    batch = verl_batch_of(healthy, qwen25, outputs, [row] * 4)
    batch.non_tensor_batch["uid"] = np.array(["task-0"] * 4, dtype=object)
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"] = batch.batch["rm_scores"]
    ours = compute_advantage(batch, adv_estimator="tau_grpo", config=healthy.algorithm).batch["advantages"]
    mask = batch.batch["response_mask"]
    kept, _ = compute_grpo_outcome_advantage(batch.batch["rm_scores"][:3], mask[:3], np.array(["task-0"] * 3))
    assert torch.equal(ours[:3], kept), "the three that trained: verl's GRPO over themselves"
    assert not ours[3].any(), "the failed sample gets no advantage"
    pooled, _ = compute_grpo_outcome_advantage(batch.batch["rm_scores"], mask, np.array(["task-0"] * 4))
    assert not torch.allclose(pooled[:3], kept), "verl's grpo would let the failure's 0 move its siblings"

    verl_metrics = compute_data_metrics(batch, use_critic=False)
    assert verl_metrics["tool_call_counts/max"] >= 1 and verl_metrics["tool_call_counts/min"] == 0
    columns = batch.non_tensor_batch
    extras = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    tau = step_metrics(episode_views(extras))
    assert tau["tau/failed/user"] == 0.25 and tau["tau/failed/share"] == 0.25
    assert tau["tau/tau2/retail/status/failed"] == 0.25 and tau["tau/tau2/retail/pass_rate"] == 0.5
    assert tau["tau/tau2/retail/termination/user_error"] == 0.25


def verl_batch_of(config, tokenizer, outputs, rows):
    from tests.adapters.verl.test_tau_agent_loop import verl_batch

    return verl_batch(config, tokenizer, outputs, rows)


def agent_loop_worker(config, manager, tokenizer) -> AgentLoopWorker:
    """verl's ``AgentLoopWorker`` without its Ray actor: the attributes ``_run_agent_loop`` reads."""
    worker = object.__new__(AgentLoopWorker)
    worker.config, worker.rollout_config, worker.tokenizer = config, config.actor_rollout_ref.rollout, tokenizer
    worker.llm_client, worker.processor, worker.hf_model_type, worker.dataset_cls = manager, None, None, RLHFDataset
    worker.tools, worker.reward_loop_worker_handles, worker.distillation_enabled = [], None, False
    worker.mm_processor_kwargs = {}
    return worker


def test_a_dead_customer_stops_the_batch_trainer_naming_it(tmp_path, tau2_backend, qwen25, oracle_server):
    """Window: 1 group x rollout.n=2 episodes; more than half failed on the customer stops the step's ray.get."""
    config = verl_config(
        "trainer.use_v1=false", "actor_rollout_ref.rollout.n=2", "+tau.max_failed_share=0.5",
        "+tau.failure_window_groups=1", *dead_customer(),
    )  # fmt: skip
    make_loop(config, HTTPServerManager(oracle_server.url), qwen25)  # registers the YAML entry, as the worker does
    worker = agent_loop_worker(config, HTTPServerManager(oracle_server.url), qwen25)
    row = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))[0]
    trajectory = {"step": 1, "sample_index": 0, "rollout_n": 0, "validate": False}
    reset_batch_path_guard()
    try:

        async def one():
            return await worker._run_agent_loop(dict(SAMPLING), trajectory, agent_name="tau_agent", **row)

        first = asyncio.run(one())  # one failure of a two-episode window: not yet
        assert first.extra_fields["status"] == "failed"
        with pytest.raises(FailureGuardError) as stop:
            asyncio.run(one())
    finally:
        reset_batch_path_guard()
    line = str(stop.value)
    assert "\n" not in line and "the user simulator (tau_user_base_url)" in line
    assert "2 of the last 2 episodes" in line and "tau_max_failed_share=0.5" in line
