"""verl 0.9's default trainer (``trainer.use_v1: true``): our loop through verl's ``AgentLoopWorkerTQ`` into a real
TransferQueue (Ray on this machine), then the ``tau_sync`` trainer's own advantage and metrics steps.

A group of four samples of one task: two solve it, one is cut at 5 tokens, one meets a customer who never
answers. The last becomes a failed sample without an exception and with integer weight versions (V1 casts them
every step), ``tau_grpo`` leaves it out of the group's advantages, the step's metrics count it, and a run of such
groups stops with one line naming the customer.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

ray = pytest.importorskip("ray")
tq = pytest.importorskip("transfer_queue", reason="TransferQueue (verl's V1 data path) is not installed")

from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from transfer_queue.metadata import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage  # noqa: E402
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ  # noqa: E402

import slime_tau_plugin.adapters.verl.register  # noqa: E402,F401  (what VERL_USE_EXTERNAL_MODULES imports)
from slime_tau_plugin.adapters.verl.trainer import TauPPOTrainerSync  # noqa: E402
from slime_tau_plugin.engine.metrics.failure_guard import FailureGuardError  # noqa: E402
from tests.verl.conftest import refs_with_tasks, verl_config  # noqa: E402
from tests.verl.server_manager import HTTPServerManager  # noqa: E402
from tests.verl.test_failures_batch_path import dead_customer  # noqa: E402
from tests.verl.test_tau_agent_loop import SAMPLING, dataset_rows, make_loop  # noqa: E402

V1 = ("trainer.v1.trainer_mode=tau_sync", "algorithm.adv_estimator=tau_grpo", "data.train_batch_size=1")


@pytest.fixture(scope="module")
def transfer_queue():
    """A local Ray with TransferQueue's controller and one storage unit (each asks Ray for one CPU)."""
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()


def tq_worker(config, manager, tokenizer):
    """verl's ``AgentLoopWorkerTQ`` without its Ray actor: the attributes ``_run_agent_loop`` reads."""
    worker = object.__new__(AgentLoopWorkerTQ.__ray_metadata__.modified_class)
    worker.config, worker.rollout_config, worker.tokenizer = config, config.actor_rollout_ref.rollout, tokenizer
    worker.llm_client, worker.processor, worker.hf_model_type, worker.dataset_cls = manager, None, None, None
    worker.tools, worker.reward_loop_worker_handles, worker.distillation_enabled = [], None, False
    worker.mm_processor_kwargs = {}
    return worker


def play_group(configs, manager, tokenizer, row, uid: str, step: int) -> None:
    """Session i of prompt ``uid`` under ``configs[i]``, as ``AgentLoopWorkerTQ._run_prompt`` runs them."""
    trajectory = {"step": step, "sample_index": 0, "rollout_n": 0, "validate": False}
    from verl.utils.dataset.rl_dataset import RLHFDataset

    async def main():
        runs = []
        for i, config in enumerate(configs):
            make_loop(config, manager, tokenizer)  # the YAML entry into verl's registry, as the worker does
            worker = tq_worker(config, manager, tokenizer)
            worker.dataset_cls = RLHFDataset
            kwargs = dict(row, uid=uid, global_steps=step)
            run = worker._run_agent_loop(dict(SAMPLING), trajectory, agent_name="tau_agent", session_id=i, **kwargs)
            runs.append(run)
        await asyncio.gather(*runs)

    asyncio.run(main())


def batch_meta(uid: str) -> KVBatchMeta:
    listed = tq.kv_list(partition_id="train").get("train", {})
    keys = sorted(k for k in listed if k.startswith(f"{uid}_"))
    return KVBatchMeta(keys=keys, tags=[dict(listed[k]) for k in keys], partition_id="train")


@dataclasses.dataclass
class Recorder:
    """Stands in for verl's ``Tracking`` (wandb, console...): what the trainer logged."""

    logged: list = dataclasses.field(default_factory=list)

    def log(self, data, step):
        self.logged.append((step, dict(data)))


def tau_trainer(config) -> TauPPOTrainerSync:
    from verl.trainer.ppo.metric_utils import RolloutMoELoadBalanceMetricsAccumulator

    trainer = object.__new__(TauPPOTrainerSync)
    trainer.config, trainer.use_critic, trainer.logger = config, False, Recorder()
    trainer._rollout_moe_lb_metrics_accumulator = RolloutMoELoadBalanceMetricsAccumulator(
        model_config=config.actor_rollout_ref.model
    )
    trainer.resource_pool_manager = type("OneGPU", (), {"get_n_gpus": lambda self: 1})()
    return trainer


def with_advantages(trainer, batch, metrics):
    """The trainer's advantage step, after the actor's log-prob recompute (model-free: the rollout's log-probs)."""
    logprobs = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["rollout_log_probs"])
    old = TensorDict({"old_log_probs": logprobs["rollout_log_probs"]}, batch_size=len(batch.keys))
    batch = tq.kv_batch_put(keys=batch.keys, partition_id="train", fields=old)
    return trainer._compute_advantage(batch, metrics)


def test_v1_dead_customer_is_failed_left_out_counted_and_stops_the_run(
    tmp_path, tau2_backend, qwen25, oracle_server, transfer_queue
):
    guard = ("+tau.max_failed_share=0.5", "+tau.failure_window_groups=2")
    healthy, short = verl_config(*V1, *guard), verl_config(*V1, *guard, "+tau.max_tokens_per_turn=5")
    dead = verl_config(*V1, *guard, *dead_customer())
    manager = HTTPServerManager(oracle_server.url)
    row = dataset_rows(tmp_path, healthy, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))[0]
    play_group([healthy, healthy, short, dead], manager, qwen25, row, "mixed", step=3)
    batch = batch_meta("mixed")
    assert len(batch.keys) == 4 and batch.tags[3]["min_global_steps"] == batch.tags[3]["max_global_steps"] == 3

    trainer, metrics = tau_trainer(healthy), {}
    batch = with_advantages(trainer, batch, metrics)
    fields = ["advantages", "rm_scores", "response_mask"]
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=fields)
    adv = [a.tolist() for a in data["advantages"].unbind(0)]
    scores = [s.sum().item() for s in data["rm_scores"].unbind(0)]
    masks = [m for m in data["response_mask"].unbind(0)]
    assert scores == [1.0, 1.0, 0.0, 0.0] and not any(adv[3])
    width = max(len(m) for m in masks)
    import numpy as np
    import torch

    pad = torch.stack([torch.nn.functional.pad(m, (0, width - len(m))) for m in masks[:3]]).float()
    rewards = torch.zeros_like(pad)
    for i in range(3):
        rewards[i, len(masks[i]) - 1] = scores[i]
    kept, _ = compute_grpo_outcome_advantage(rewards, pad, np.array(["mixed"] * 3))
    for i in range(3):
        assert adv[i] == pytest.approx(kept[i, : len(masks[i])].tolist()), "verl's GRPO over the three that trained"

    trainer._compute_metrics(batch, metrics, {"step": 1.0}, global_steps=3, epoch=0)
    assert metrics["tau/failed/user"] == 0.25 and metrics["tau/tau2/retail/status/failed"] == 0.25
    assert metrics["tau/tau2/retail/pass_rate"] == 0.5 and "training/off_policy/trajectory_spans/mean" in metrics
    tq.kv_clear(keys=batch.keys, partition_id="train")

    play_group([dead] * 4, manager, qwen25, row, "dead", step=4)
    trainer.global_steps = 4
    with pytest.raises(FailureGuardError) as stop:  # 5 of a 2-group window of 8 failed on the customer
        with_advantages(trainer, batch_meta("dead"), {})
    line = str(stop.value)
    assert "\n" not in line and "the user simulator (tau_user_base_url)" in line and "5 of the last 8" in line
    assert (
        trainer.logger.logged[-1] == (4, trainer.logger.logged[-1][1])
        and trainer.logger.logged[-1][1]["tau/failed/user"] == 1.0
    )


def test_v1_validation_reports_tau_pass_hat_k(transfer_queue):
    trainer = tau_trainer(verl_config(*V1))
    out = trainer._val_metrics_update(
        ["tau2_retail"] * 4, ["a", "a", "b", "b"], {"acc": [1.0, 1.0, 1.0, 0.0], "reward": [1.0, 1.0, 1.0, 0.0]}, []
    )
    assert out["val-core/tau2_retail/tau/pass^1"] == 0.75 and out["val-core/tau2_retail/tau/pass^2"] == 0.5
    assert "val-core/tau2_retail/acc/best@2/mean" in out, "verl's own pass@k (bootstrapped) stays"
