"""GRPO groups that span processes: TRL's own sampler split, every process's rows played, TRL trains on them all.

Each layout (processes x per_device_train_batch_size x num_generations) is split the way TRL 1.16 splits it:
``GRPOTrainer._get_train_sampler`` (its ``RepeatSampler``) under accelerate's ``prepare_data_loader``
(``BatchSamplerShard``), one fresh sampler per process as each process builds its own. Each process's
``TauRollout`` runs in its own thread, with an accelerator that reports that process's index; its all-gather
(``TauRollout.gather``: accelerate's ``gather_object`` across processes) gathers across the threads, in process
order. The rows of every process, in process order, are what TRL gathers; TRL's own
``_generate_and_score_completions`` then builds the training batch of the whole generation batch (its group
statistics run over the gathered rows), and the mask TRL trains on must equal ours on every row.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from accelerate.data_loader import prepare_data_loader
from datasets import Dataset
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from slime_tau_plugin.adapters.trl.check import check_batches, recording_trainer_class
from slime_tau_plugin.adapters.trl.groups import row_places
from slime_tau_plugin.adapters.trl.reward import tau_reward
from slime_tau_plugin.adapters.trl.rollout import METRICS_FIELD, TauRollout, episode_requests
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError

ORACLE_TASK = "tau2/retail/train/57"
NO_SUCH_TASK = "tau2/retail/train/no-such-task"
DATASET = [ORACLE_TASK, ORACLE_TASK, NO_SUCH_TASK, ORACLE_TASK]
"""Two rows of the same task can land in one batch as two groups: a group is its global place, not its prompt."""
LAYOUTS = [(4, 2, 8), (2, 3, 2), (8, 4, 8)]
"""(processes, per_device_train_batch_size, num_generations): the layouts issue #43 saw refused."""


def shards(processes: int, per_device: int, groups: int, seed: int = 1) -> list[list[str]]:
    """Each process's first generation batch, by TRL's sampler under accelerate's sharding."""
    out = []
    for index in range(processes):
        owner = SimpleNamespace(
            args=SimpleNamespace(generation_batch_size=processes * per_device, seed=seed, steps_per_generation=1),
            num_generations=groups,
            num_iterations=1,
            shuffle_dataset=True,
        )
        rows = [{"prompt": p} for p in DATASET]
        sampler = GRPOTrainer._get_train_sampler(owner, rows)
        loader = DataLoader(rows, batch_size=per_device, sampler=sampler, collate_fn=list)
        shard = prepare_data_loader(loader, num_processes=processes, process_index=index, put_on_device=False)
        out.append([row["prompt"] for row in next(iter(shard))])
    return out


class Exchange:
    """accelerate's ``gather_object`` across threads that stand in for processes: every list, in process order."""

    def __init__(self, processes: int) -> None:
        self.barrier = threading.Barrier(processes, timeout=600)
        self.slots: list[list[Any]] = [[] for _ in range(processes)]

    def gather(self, index: int, values: list[Any]) -> list[Any]:
        self.slots[index] = list(values)
        self.barrier.wait()
        gathered = [value for slot in self.slots for value in slot]
        self.barrier.wait()
        return gathered


class ProcessView:
    """TRL's trainer as process ``index`` of ``processes`` sees it (only the accelerator differs)."""

    def __init__(self, trainer: Any, index: int, processes: int) -> None:
        self._trainer = trainer
        self.accelerator = SimpleNamespace(process_index=index, num_processes=processes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trainer, name)


class Processes:
    """The single trainer's ``rollout_func``: splits the generation batch into the processes' shards, plays each in
    its own thread with its own ``TauRollout`` and returns the rows in process order (what TRL gathers)."""

    def __init__(self, expected: list[list[str]], **settings: Any) -> None:
        self.expected = expected
        self.rollouts = [TauRollout(off_policy=True, **settings) for _ in expected]
        self.outputs: list[dict[str, Any]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        n = len(self.expected[0])
        parts = [prompts[i * n : (i + 1) * n] for i in range(len(self.expected))]
        assert parts == self.expected
        exchange = Exchange(len(parts))
        for i, rollout in enumerate(self.rollouts):  # accelerate's gather_object, across the threads
            rollout.gather = lambda values, i=i: exchange.gather(i, values)
        with ThreadPoolExecutor(len(parts)) as pool:
            futures = [
                pool.submit(rollout, part, ProcessView(trainer, i, len(parts)))
                for i, (rollout, part) in enumerate(zip(self.rollouts, parts, strict=True))
            ]
            self.outputs = [f.result() for f in futures]
        rows = [key for key in self.outputs[0] if key != METRICS_FIELD]
        merged = {key: [row for out in self.outputs for row in out[key]] for key in rows}
        merged[METRICS_FIELD] = self.outputs[0][METRICS_FIELD]
        return merged


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "x".join(map(str, x)))
def test_groups_that_span_processes_are_played_and_trained_on_every_process(
    layout, oracle_url, tiny_trl_model, tmp_path
):
    processes, per_device, groups = layout
    split = shards(processes, per_device, groups)
    holders: dict[int, set[int]] = {}
    for index, part in enumerate(split):
        for place in row_places(part, index, processes, groups):
            holders.setdefault(place.group, set()).add(index)
    assert any(len(held) > 1 for held in holders.values())  # a group spans processes
    rollout = Processes(split, tau_policy_url=oracle_url, tau_user="scripted", tau_max_failed_share=1.0)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=processes * per_device,  # this one process trains the gathered batch
        num_generations=groups,
        max_completion_length=4096,
        report_to="none",
        use_cpu=True,
        seed=1,
    )
    trainer = recording_trainer_class()(
        model=AutoModelForCausalLM.from_pretrained(tiny_trl_model),
        reward_funcs=[tau_reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": p} for p in DATASET]),
        processing_class=AutoTokenizer.from_pretrained(tiny_trl_model),
        rollout_func=rollout,
    )
    trainer.model.train()
    global_batch = [p for part in split for p in part]
    out = trainer._generate_and_score_completions([{"prompt": p} for p in global_batch])

    summary = check_batches(trainer.tau_batches)
    assert summary["rows"] == processes * per_device and summary["masks_equal"] and summary["rewards_equal"]
    assert out["advantages"].shape[0] == processes * per_device
    batch = trainer.tau_batches[0].rollout
    for row, prompt in enumerate(global_batch):
        if prompt == ORACLE_TASK:
            assert batch["tau_status"][row] == "completed" and batch["tau_score"][row] == 1.0
        else:
            assert batch["tau_status"][row] == "failed" and trainer.tau_batches[0].advantages[row] == 0.0
    # every process logs the same step metrics, over every process's rows
    metrics = [o[METRICS_FIELD] for o in rollout.outputs]
    assert all(m == metrics[0] for m in metrics)
    assert metrics[0]["tau/tau2/retail/samples"] == len(global_batch)
    failed = sum(p == NO_SUCH_TASK for p in global_batch) / len(global_batch)
    assert metrics[0]["tau/failed/share"] == failed


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: "x".join(map(str, x)))
def test_seeds_and_groups_come_from_the_global_row_not_the_process(layout, tmp_path):
    processes, per_device, groups = layout
    split = shards(processes, per_device, groups)
    config, args = (
        TauConfig(user_shared_opening=True),
        GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True),
    )
    spread = []
    for index, part in enumerate(split):
        places = row_places(part, index, processes, groups)
        spread += episode_requests(part, places, config, args, 3, "1/3/0")
    whole = [p for part in split for p in part]
    alone = episode_requests(whole, row_places(whole, 0, 1, groups), config, args, 3, "1/3/0")
    seeds = [r.sampling_params["sampling_seed"] for r in spread]
    assert seeds == [r.sampling_params["sampling_seed"] for r in alone]  # 1 process or many: the same episodes
    assert [r.options.group for r in spread] == [r.options.group for r in alone]
    assert len(set(seeds)) == len(seeds)  # no two rows share a seed, not even two groups of one task
    for g in range(len(whole) // groups):
        rows = spread[g * groups : (g + 1) * groups]
        assert len({r.options.group for r in rows}) == 1  # one group, whichever processes hold it
    assert len({r.options.group for r in spread}) == len(whole) // groups


def test_only_a_batch_that_is_not_whole_groups_or_not_in_sampler_order_is_refused():
    with pytest.raises(ConfigError) as info:
        row_places(["a", "a", "a"], 0, 3, 2)  # 9 rows: not whole groups of 2
    assert "global batch of 9 rows" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        row_places(["a", "b"], 1, 4, 8)  # one group on this process, two prompts
    assert "different prompts" in str(info.value) and "\n" not in str(info.value)
    places = row_places(["a", "a"], 3, 4, 8)  # the last quarter of one group of 8
    assert [(p.row, p.group, p.copy) for p in places] == [(6, 0, 6), (7, 0, 7)]


def test_every_process_takes_the_same_stop_decision(oracle_url, tiny_trl_model, tmp_path):
    """A dead endpoint seen by all processes' rows: each process's guard trips on the same gathered rows, so every
    process stops at the same step (none waits alone in TRL's next collective)."""
    processes, per_device, groups = 4, 2, 8
    split = [[NO_SUCH_TASK] * per_device for _ in range(processes)]  # one group of 8 across 4 processes
    rollout = Processes(split, tau_policy_url=oracle_url, tau_user="scripted")
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_trl_model),
        reward_funcs=[tau_reward],
        args=GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=processes * per_device,
            num_generations=groups,
            report_to="none",
            use_cpu=True,
            seed=1,
        ),
        train_dataset=Dataset.from_list([{"prompt": NO_SUCH_TASK}]),
        processing_class=AutoTokenizer.from_pretrained(tiny_trl_model),
        rollout_func=rollout,
    )
    trainer.model.train()
    trainer._generate_and_score_completions([{"prompt": NO_SUCH_TASK}] * (processes * per_device))

    errors = [r.signal.error for r in rollout.rollouts]
    assert all(e is not None for e in errors)
    assert len({str(e) for e in errors}) == 1 and "8 of the last 8 episodes" in str(errors[0])
    assert all(e.endpoint == "config" for e in errors)
    assert all(r.callback in trainer.callback_handler.callbacks for r in rollout.rollouts)
