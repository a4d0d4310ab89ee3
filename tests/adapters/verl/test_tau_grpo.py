"""``tau_<name>`` through verl's registry: a failed episode gets no advantage, and its siblings get exactly what verl's
own estimator ``<name>`` gives them without it (the reference: verl's function called on the group minus that row)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage

import slime_tau_plugin.adapters.verl.advantage  # noqa: F401  (registers tau_<name>, as VERL_USE_EXTERNAL_MODULES does)
from slime_tau_plugin.adapters.verl.advantage import wrap_estimator
from slime_tau_plugin.engine.errors import ConfigError


def rows(rewards: list[float], trains: list[bool], width: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """One scalar reward on each row's last id; a failed row has mask 0 (as ``TauAgentLoop`` returns it)."""
    mask = torch.tensor([[1.0] * width if t else [0.0] * width for t in trains])
    scores = torch.zeros(len(rewards), width)
    scores[:, -1] = torch.tensor(rewards)
    return scores, mask


ALGORITHM = OmegaConf.create({"norm_adv_by_std_in_grpo": True, "gamma": 1.0, "lam": 1.0})


@pytest.mark.parametrize("name", ["rloo", "reinforce_plus_plus", "grpo", "reinforce_plus_plus_baseline", "opo"])
def test_a_failed_episode_gets_nothing_and_its_siblings_get_verls_numbers_without_it(name):
    # two groups of four; in group a row 2 FAILED (mask 0, reward 0), group b is healthy
    scores, mask = rows([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0], [True, True, False, True] + [True] * 4)
    scores[1, 0], scores[5, 1] = 0.25, 0.5  # a few token-level rewards, so token-wise estimators differ per id
    index = np.array(["a"] * 4 + ["b"] * 4, dtype=object)
    data = compute_advantage(_proto(scores, mask, index), adv_estimator=f"tau_{name}", config=ALGORITHM)
    ours = data.batch["advantages"]
    keep = [0, 1, 3, 4, 5, 6, 7]
    alone = _proto(scores[keep], mask[keep], index[keep])
    reference = compute_advantage(alone, adv_estimator=name, config=ALGORITHM).batch["advantages"]
    assert not ours[2].any(), "the failed row gets no advantage"
    assert torch.allclose(ours[keep], reference, atol=1e-6), f"{name} over the rows that trained"
    healthy = compute_advantage(_proto(scores, mask.clone().fill_(1.0), index), adv_estimator=name, config=ALGORITHM)
    assert not torch.allclose(healthy.batch["advantages"][keep], reference, atol=1e-4), "the failed 0 would count"


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


def test_estimators_that_cannot_be_wrapped_are_refused_in_one_line():
    for name, words in (("gae", "values"), ("remax", "reward_baselines"), ("nope", "tau_rloo")):
        with pytest.raises(ConfigError) as refused:
            wrap_estimator(name)
        assert f"algorithm.adv_estimator=tau_{name}" in str(refused.value) and words in str(refused.value)
        assert "\n" not in str(refused.value)


def _proto(scores: torch.Tensor, mask: torch.Tensor, index: np.ndarray):
    from verl import DataProto

    batch = {"token_level_rewards": scores.clone(), "response_mask": mask.clone()}
    return DataProto.from_dict(tensors=batch, non_tensors={"uid": index.copy()})
