"""TRL's own GRPOTrainer trains on τ episodes from our engine (oracle server over real HTTP, real τ² retail)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

from slime_tau_plugin.adapters.trl.check import check_batches, recording_trainer_class
from slime_tau_plugin.adapters.trl.reward import tau_reward
from slime_tau_plugin.adapters.trl.rollout import TauRollout

ORACLE_TASK = "tau2/retail/train/57"
"""A short oracle episode (no write, nothing to communicate)."""
NO_SUCH_TASK = "tau2/retail/train/no-such-task"


def grpo_args(out: Path, **overrides) -> GRPOConfig:
    values = dict(
        output_dir=str(out),
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        max_completion_length=4096,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=1,
        gradient_checkpointing=False,
    )
    values.update(overrides)
    return GRPOConfig(**values)


def test_grpo_trainer_steps_on_oracle_episodes_and_leaves_failed_ones_out(oracle_url, tiny_trl_model, tmp_path):
    trainer = recording_trainer_class()(
        model=AutoModelForCausalLM.from_pretrained(tiny_trl_model),
        reward_funcs=[tau_reward],
        args=grpo_args(tmp_path),
        train_dataset=Dataset.from_list([{"prompt": ORACLE_TASK}, {"prompt": NO_SUCH_TASK}]),
        processing_class=AutoTokenizer.from_pretrained(tiny_trl_model),
        rollout_func=TauRollout(tau_policy_url=oracle_url, off_policy=True, tau_user="scripted"),
    )
    trainer.train()

    assert trainer.state.global_step == 1
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert losses and all(math.isfinite(x) for x in losses)
    summary = check_batches(trainer.tau_batches)
    assert summary["rows"] == 4 and summary["masks_equal"] and summary["rewards_equal"]
    out = trainer.tau_batches[0].rollout
    by_task = {}
    for i, task in enumerate(out["tau_task"]):
        by_task.setdefault(task, []).append(i)
    oracle_rows = [i for i, p in enumerate(out["tau_status"]) if p == "completed"]
    failed_rows = [i for i, p in enumerate(out["tau_status"]) if p == "failed"]
    assert len(oracle_rows) == 2 and len(failed_rows) == 2
    for i in oracle_rows:
        assert out["tau_score"][i] == 1.0  # τ's reward for the oracle's gold actions
        assert out["tau_termination"][i] == "user_stop"
        mask = out["env_mask"][i]
        assert sum(mask) > 0 and len(out["logprobs"][i]) == len(mask) == len(out["completion_ids"][i])
        assert all(lp == 0.0 for lp, m in zip(out["logprobs"][i], mask, strict=True) if not m)
    for i in failed_rows:
        assert out["tau_score"][i] is None and not any(out["env_mask"][i])
        assert "no-such-task" in out["tau_error"][i] and out["tau_termination"][i] == "env_error"
        assert trainer.tau_batches[0].advantages[i] == 0.0
    # TRL logged the mean of τ's rewards over the rows it could score (the failed ones left out, not 0)
    logged = next(row for row in trainer.state.log_history if "rewards/tau_reward/mean" in row)
    assert logged["rewards/tau_reward/mean"] == 1.0
    # τ's step metrics in TRL's log, slime's names: over all 4 rows, the failed ones counted per endpoint
    assert logged["tau/tau2/retail/samples"] == 4 and logged["tau/tau2/retail/status/completed"] == 0.5
    assert logged["tau/tau2/retail/pass_rate"] == 0.5 and logged["tau/failed/config"] == 0.5  # a task not in τ


def test_copies_of_a_prompt_are_played_with_their_own_seeds():
    from slime_tau_plugin.adapters.trl.groups import episode_seed

    seeds = {episode_seed(1, 0, ORACLE_TASK, row) for row in range(4)}
    assert len(seeds) == 4 and all(0 <= s < 2**48 for s in seeds)
    assert episode_seed(1, 0, ORACLE_TASK, 0) == episode_seed(1, 0, ORACLE_TASK, 0)


def test_the_copies_of_a_prompt_form_one_group_in_training_and_none_in_evaluation(tmp_path):
    from slime_tau_plugin.adapters.trl.groups import row_places
    from slime_tau_plugin.adapters.trl.rollout import episode_requests
    from slime_tau_plugin.engine.config.tau_config import TauConfig

    prompts = [ORACLE_TASK] * 2 + ["tau2/retail/train/1"] * 2  # TRL's RepeatSampler order, num_generations=2
    args, config = grpo_args(tmp_path), TauConfig(user_shared_opening=True)
    places = row_places(prompts, 0, 1, 2)
    train = episode_requests(prompts, places, config, args, 0, "1/0/0")
    groups = [r.options.group for r in train]
    assert groups[0] == groups[1] != groups[2] == groups[3] and None not in groups
    assert len({r.sampling_params["sampling_seed"] for r in train}) == 4  # each copy its own seed
    assert (
        groups[0] != episode_requests(prompts, places, config, args, 0, "1/0/1")[0].options.group
    )  # named per generation
    assert {r.options.group for r in episode_requests(prompts, places, config, args, 0, None)} == {None}


def test_import_slime_tau_plugin_does_not_import_trl():
    code = "import sys, slime_tau_plugin; sys.exit(1 if 'trl' in sys.modules or 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize(
    "prompt", ["tau2/retail/train", ["tau2/retail/train/1"], "tau9/retail/train/1", "tau1/retail/test/0"]
)
def test_a_prompt_that_names_no_task_is_refused_in_one_line(prompt):
    from slime_tau_plugin.adapters.trl.rows import task_request
    from slime_tau_plugin.engine.config.tau_config import TauConfig
    from slime_tau_plugin.engine.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        task_request(prompt, TauConfig())
    assert "\n" not in str(info.value)
