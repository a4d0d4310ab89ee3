"""``tau_grpo`` at the edges, through verl's registry: what a group keeps when its failures are left out."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

import slime_tau_plugin.adapters.verl.advantage  # noqa: F401  (registers tau_grpo)


def rows(rewards: list[float], trains: list[bool], width: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """One scalar reward on each row's last id; a failed row has mask 0 (as ``TauAgentLoop`` returns it)."""
    mask = torch.tensor([[1.0] * width if t else [0.0] * width for t in trains])
    scores = torch.zeros(len(rewards), width)
    scores[:, -1] = torch.tensor(rewards)
    return scores, mask


def test_healthy_groups_get_verl_grpo_exactly_and_a_lone_survivor_gets_zero():
    fn = get_adv_estimator_fn("tau_grpo")
    scores, mask = rows([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [True, True, True, True, False, False])
    index = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    adv, returns = fn(token_level_rewards=scores, response_mask=mask, index=index, config={})
    expected, _ = compute_grpo_outcome_advantage(scores[:3], mask[:3], index[:3])
    assert torch.equal(adv[:3], expected) and torch.equal(adv, returns)
    assert not adv[3:].any(), "group b: one row trained, nothing to compare it with; its failures get nothing"


def test_one_sample_per_prompt_keeps_verl_convention_and_std_switch_is_read():
    fn = get_adv_estimator_fn("tau_grpo")
    scores, mask = rows([1.0, 0.0], [True, True])
    single, _ = fn(token_level_rewards=scores, response_mask=mask, index=np.array(["a", "b"], dtype=object))
    assert single[0].tolist() == pytest.approx([1.0] * 3, abs=1e-5), "rollout.n=1: verl's GRPO gives the raw score"
    scores, mask = rows([1.0, 0.0, 0.0], [True, True, False])
    index = np.array(["a"] * 3, dtype=object)
    centred, _ = fn(scores, mask, index, config={"norm_adv_by_std_in_grpo": False})
    assert centred[:2, 0].tolist() == [0.5, -0.5] and not centred[2].any()
