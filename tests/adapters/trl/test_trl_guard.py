"""A dead endpoint stops a real TRL run naming it: TRL's ``GRPOTrainer.train()`` with a user simulator nobody
answers (a closed port) ends with the failure guard's one line, after the step that tripped it, not at max_steps."""

from __future__ import annotations

import socket

import pytest
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from slime_tau_plugin.adapters.trl.reward import tau_reward
from slime_tau_plugin.adapters.trl.rollout import TauRollout
from slime_tau_plugin.reporting.failure_guard import FailureGuardError

ORACLE_TASK = "tau2/retail/train/57"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_user_simulator_stops_the_trl_run_in_one_line_naming_it(oracle_url, tiny_trl_model, tmp_path):
    rollout = TauRollout(
        off_policy=True,
        tau_policy_url=oracle_url,
        tau_user="llm",
        tau_user_base_url=f"http://127.0.0.1:{closed_port()}/v1",
        tau_user_model="m",
        tau_user_retries=1,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_trl_model),
        reward_funcs=[tau_reward],
        args=GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=2,
            num_generations=2,
            max_steps=3,
            max_completion_length=4096,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            seed=1,
        ),
        train_dataset=Dataset.from_list([{"prompt": ORACLE_TASK}] * 4),
        processing_class=AutoTokenizer.from_pretrained(tiny_trl_model),
        rollout_func=rollout,
    )
    with pytest.raises(FailureGuardError) as info:
        trainer.train()

    message = str(info.value)
    assert "\n" not in message and info.value.endpoint == "user"
    assert "FAILED on the user simulator (tau_user_base_url)" in message
    assert "2 of the last 2 episodes" in message and "tau_max_failed_share=0.5" in message
    assert trainer.state.global_step == 1  # the step that tripped it, then TRL's loop stopped
    assert rollout.callback in trainer.callback_handler.callbacks
    logged = next(row for row in trainer.state.log_history if "tau/failed/user" in row)
    assert logged["tau/failed/user"] == 1.0 and logged["tau/tau2/retail/status/failed"] == 1.0
