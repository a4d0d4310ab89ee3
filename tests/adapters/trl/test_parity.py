"""TRL trains on slime's episode: the parity cases (``tests/parity.py``) through ``TauRollout`` inside TRL's own
``GRPOTrainer._generate_and_score_completions`` (its padding, ``env_mask`` -> ``tool_mask``, its reward functions),
compared id for id with slime's ``generate`` in this process, against one oracle server. What is compared is the
batch TRL's loss reads: prompt and completion ids unpadded by ``prompt_mask``/``completion_mask``, the loss mask
``completion_mask * tool_mask``, ``sampling_per_token_logps`` and the reward ``tau_reward`` gave (no optimizer step).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from slime_tau_plugin.adapters.trl.reward import tau_reward
from slime_tau_plugin.adapters.trl.rollout import TauRollout
from tests.parity import EXPECTED_STATUS, PARITY_CASES, ParityRecord, assert_same, slime_record

COPIES = 2
"""TRL's ``num_generations``: each copy of a prompt is its own episode, and each must be slime's."""


class ParityTrainer(GRPOTrainer):
    """TRL's trainer, keeping what its reward functions returned and the rollout's ``tau_status`` per row."""

    def _generate(self, prompts: list) -> Any:
        out = super()._generate(prompts)
        self.parity_status = list(out[5]["tau_status"])  # extra_fields: what TRL forwards to the reward functions
        return out

    def _calculate_rewards(self, *args: Any, **kwargs: Any) -> Any:
        self.parity_rewards = super()._calculate_rewards(*args, **kwargs)
        return self.parity_rewards


@pytest.fixture(scope="module")
def trainer(tiny_trl_model, tmp_path_factory) -> ParityTrainer:
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("trl-parity")),
        per_device_train_batch_size=COPIES,
        num_generations=COPIES,
        max_completion_length=8192,
        report_to="none",
        use_cpu=True,
        seed=1,
    )
    built = ParityTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_trl_model),
        reward_funcs=[tau_reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": c.task_name} for c in PARITY_CASES]),
        processing_class=AutoTokenizer.from_pretrained(tiny_trl_model),
        rollout_func=TauRollout(),
    )
    built.model.train()  # a training batch (TRL reads model.training), as inside trainer.train()
    return built


def trl_records(trainer: ParityTrainer, out: dict[str, Any]) -> list[ParityRecord]:
    """Each row of TRL's padded batch, unpadded by its masks, with the reward ``tau_reward`` gave it."""
    records = []
    loss_mask = out["completion_mask"] * out["tool_mask"]
    for i, status in enumerate(trainer.parity_status):
        prompt = [x for x, m in zip(out["prompt_ids"][i].tolist(), out["prompt_mask"][i].tolist(), strict=True) if m]
        n = int(out["completion_mask"][i].sum().item())
        reward = float(trainer.parity_rewards[i, 0].item())
        records.append(
            ParityRecord.of(
                prompt,
                out["completion_ids"][i, :n].tolist(),
                loss_mask[i, :n].tolist(),
                out["sampling_per_token_logps"][i, :n].tolist(),
                None if math.isnan(reward) else reward,  # TRL's "unscorable": left out of its group, advantage 0
                status,
            )
        )
    return records


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: c.name)
def test_trl_trains_on_slimes_episode(trainer, oracle_url, qwen25_dir, case):
    trainer.rollout_func = TauRollout(tau_policy_url=oracle_url, off_policy=True, **case.settings)
    out = trainer._generate_and_score_completions([{"prompt": case.task_name}] * COPIES)
    records = trl_records(trainer, out)

    slime = slime_record(oracle_url, qwen25_dir, case)
    assert slime.status == EXPECTED_STATUS[case.name]
    assert (sum(slime.loss_mask) > 0) == (slime.reward is not None), "an episode trains exactly when it is scored"
    assert len(records) == COPIES
    for record in records:
        assert_same(slime, record, "TRL", case)
