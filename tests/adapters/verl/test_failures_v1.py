"""verl 0.9's default trainer (``trainer.use_v1: true``) in its own ``sync`` mode: our loop through verl's
``AgentLoopWorkerTQ`` into a real TransferQueue (Ray on this machine), then verl's own replay buffer (chosen by verl's
own constructor: τ's ``TauReplayBuffer``, a sync ``ReplayBuffer``) and verl's advantage step.

A group of four samples of one task: two solve it, one is cut at 5 tokens, one meets a customer who never
answers. The last becomes a failed sample without an exception and with integer weight versions (V1 casts them
every step), ``tau_grpo`` and ``tau_rloo`` leave it out of the group's advantages, the sampler's step metrics count
it, a run of such groups stops with one line naming the customer, and validation writes each task's τ pass^k where
verl's own validation reads it.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")
tq = pytest.importorskip("transfer_queue", reason="TransferQueue (verl's V1 data path) is not installed")

from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from transfer_queue.metadata import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_rloo_outcome_advantage  # noqa: E402
from verl.trainer.ppo.metric_utils import process_validation_metrics  # noqa: E402
from verl.trainer.ppo.v1 import PPOTrainerSync, get_trainer_cls  # noqa: E402
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync  # noqa: E402

import slime_tau_plugin.adapters.verl.register  # noqa: E402,F401  (what VERL_USE_EXTERNAL_MODULES imports)
from slime_tau_plugin.adapters.verl.sampler import overrides  # noqa: E402
from slime_tau_plugin.reporting.failure_guard import FailureGuardError  # noqa: E402
from tests.adapters.verl.conftest import refs_with_tasks, verl_config  # noqa: E402
from tests.adapters.verl.server_manager import HTTPServerManager  # noqa: E402
from tests.adapters.verl.test_failures_batch_path import dead_customer  # noqa: E402
from tests.adapters.verl.test_tau_agent_loop import SAMPLING, dataset_rows, make_loop  # noqa: E402

V1 = (*overrides("sync"), "algorithm.adv_estimator=tau_grpo", "data.train_batch_size=1")


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


def play_group(configs, manager, tokenizer, row, uid: str, step: int, validate: bool = False) -> None:
    """Session i of prompt ``uid`` under ``configs[i]``, as ``AgentLoopWorkerTQ._run_prompt`` runs them, then the
    prompt's ``finished`` tag, as ``_run_prompt`` writes it when every session settled."""
    trajectory = {"step": step, "sample_index": 0, "rollout_n": 0, "validate": validate}
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
    tag = {"is_prompt": True, "status": "finished", "global_steps": step}
    tq.kv_batch_put(keys=[uid], partition_id="val" if validate else "train", tags=[tag])


def verl_trainer(config):
    """verl's own trainer for ``config``: its registry's class for the mode, its constructor (which picks the replay
    buffer: ``PPOTrainer._build_replay_buffer``)."""
    return get_trainer_cls(config.trainer.v1.trainer_mode)(config)


def test_verl_runs_its_own_sync_trainer_and_sync_replay_buffer_with_our_sampler():
    trainer = verl_trainer(verl_config(*V1))
    buffer = trainer.replay_buffer
    assert type(trainer) is PPOTrainerSync and trainer.trainer_mode == "sync" and buffer.trainer_mode == "sync"
    assert isinstance(buffer, ReplayBuffer) and not isinstance(buffer, ReplayBufferAsync)
    assert type(buffer).__name__ == "TauReplayBuffer" and buffer.tau_guard.settings.window_groups == 1
    colocated = verl_trainer(verl_config(*overrides("colocate_async"), "data.train_batch_size=1"))
    assert colocated.trainer_mode == "colocate_async" and isinstance(colocated.replay_buffer, ReplayBufferAsync)
    assert type(colocated.replay_buffer).__name__ == "TauReplayBufferAsync"


def with_advantages(trainer, batch, metrics):
    """verl's advantage step, after the actor's log-prob recompute (model-free: the rollout's log-probs)."""
    logprobs = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["rollout_log_probs"])
    old = TensorDict({"old_log_probs": logprobs["rollout_log_probs"]}, batch_size=len(batch.keys))
    batch = tq.kv_batch_put(keys=batch.keys, partition_id="train", fields=old)
    return trainer._compute_advantage(batch, metrics)


def in_session_order(batch):
    """The batch's rows by key (``{uid}_{session}_{output}``): session i is ``configs[i]`` of ``play_group``."""
    rows = sorted(zip(batch.keys, batch.tags, strict=True))
    return KVBatchMeta(keys=[k for k, _ in rows], tags=[t for _, t in rows], partition_id=batch.partition_id)


def advantages_of(trainer, batch):
    with_advantages(trainer, batch, {})
    data = tq.kv_batch_get(
        keys=batch.keys, partition_id="train", select_fields=["advantages", "rm_scores", "response_mask"]
    )
    adv = [a.tolist() for a in data["advantages"].unbind(0)]
    scores = [s.sum().item() for s in data["rm_scores"].unbind(0)]
    return adv, scores, list(data["response_mask"].unbind(0))


def verl_alone(estimator, masks, scores, keep):
    """verl's own estimator over the rows in ``keep`` only, padded as verl pads them."""
    width = max(len(m) for m in masks)
    pad = torch.stack([torch.nn.functional.pad(masks[i], (0, width - len(masks[i]))) for i in keep]).float()
    rewards = torch.zeros_like(pad)
    for j, i in enumerate(keep):
        rewards[j, len(masks[i]) - 1] = scores[i]
    out, _ = estimator(rewards, pad, np.array(["g"] * len(keep), dtype=object))
    return out


def test_v1_dead_customer_is_failed_left_out_counted_and_stops_the_run(
    tmp_path, tau2_backend, qwen25, oracle_server, transfer_queue
):
    guard = ("+tau.max_failed_share=0.5", "+tau.failure_window_groups=2")
    healthy, short = verl_config(*V1, *guard), verl_config(*V1, *guard, "+tau.max_tokens_per_turn=5")
    dead = verl_config(*V1, *guard, *dead_customer())
    manager = HTTPServerManager(oracle_server.url)
    row = dataset_rows(tmp_path, healthy, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))[0]
    play_group([healthy, healthy, short, dead], manager, qwen25, row, "mixed", step=3)

    trainer = verl_trainer(healthy)
    batch, metrics = trainer.replay_buffer.sample(global_steps=3, partition_id="train", batch_size=1)  # verl's own
    batch = in_session_order(batch)
    assert len(batch.keys) == 4 and batch.tags[3]["min_global_steps"] == batch.tags[3]["max_global_steps"] == 3
    assert metrics["tau/failed/user"] == 0.25 and metrics["tau/tau2/retail/status/failed"] == 0.25
    assert metrics["tau/tau2/retail/pass_rate"] == 0.5

    adv, scores, masks = advantages_of(trainer, batch)
    assert scores == [1.0, 1.0, 0.0, 0.0] and not any(adv[3])
    kept = verl_alone(compute_grpo_outcome_advantage, masks, scores, [0, 1, 2])
    for i in range(3):
        assert adv[i] == pytest.approx(kept[i, : len(masks[i])].tolist()), "verl's GRPO over the three that trained"
    rloo = verl_trainer(verl_config(*V1, *guard, "algorithm.adv_estimator=tau_rloo"))
    adv, _, _ = advantages_of(rloo, batch)
    kept = verl_alone(compute_rloo_outcome_advantage, masks, scores, [0, 1, 2])
    assert not any(adv[3])
    for i in range(3):
        assert adv[i] == pytest.approx(kept[i, : len(masks[i])].tolist()), "verl's RLOO over the three that trained"
    tq.kv_clear(keys=batch.keys, partition_id="train")

    play_group([dead] * 4, manager, qwen25, row, "dead", step=4)
    with pytest.raises(FailureGuardError) as stop:  # 5 of a 2-group window of 8 failed on the customer
        trainer.replay_buffer.sample(global_steps=4, partition_id="train", batch_size=1)
    line = str(stop.value)
    assert "\n" not in line and "the user simulator (tau_user_base_url)" in line and "5 of the last 8" in line
    tq.kv_clear(keys=list(tq.kv_list(partition_id="train").get("train", {})), partition_id="train")


def test_v1_validation_writes_tau_pass_hat_k_where_verl_reads_it(
    tmp_path, tau2_backend, qwen25, oracle_server, transfer_queue
):
    healthy, short = verl_config(*V1), verl_config(*V1, "+tau.max_tokens_per_turn=5")
    dead = verl_config(*V1, *dead_customer())
    manager = HTTPServerManager(oracle_server.url)
    row = dataset_rows(tmp_path, healthy, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))[0]
    play_group([healthy, healthy, short, dead], manager, qwen25, row, "task", step=0, validate=True)
    trainer = verl_trainer(healthy)
    batch, _ = trainer.replay_buffer.sample(global_steps=0, partition_id="val", batch_size=1)  # as verl's _validate
    batch = in_session_order(batch)
    data = tq.kv_batch_get(keys=batch.keys, partition_id="val", select_fields=["uid", "data_source", "extra_fields"])
    sources, uids = data.pop("data_source").tolist(), data.pop("uid").tolist()
    infos = [e["reward_extra_info"] for e in data.pop("extra_fields").tolist()]
    assert [i["failed"] for i in infos] == [0.0, 0.0, 0.0, 1.0] and [i["acc"] for i in infos] == [1.0, 1.0, 0.0, 0.0]
    # three are evidence, two succeeded: pass^1 = 2/3, pass^2 = C(2,2)/C(3,2), pass^3 = 0, pass^4 undefined
    assert [i["tau_pass^2"] for i in infos] == [pytest.approx(1 / 3)] * 4 and [i["tau_pass^4"] for i in infos] == [
        None
    ] * 4
    columns = {key: [i[key] for i in infos] for key in ("acc", "tau_pass^1", "tau_pass^3")}
    verl = process_validation_metrics(sources, uids, columns)
    assert verl["tau2_retail"]["tau_pass^1"]["mean@4"] == pytest.approx(2 / 3)
    assert verl["tau2_retail"]["tau_pass^3"]["mean@4"] == 0.0
    tq.kv_clear(keys=batch.keys, partition_id="val")
