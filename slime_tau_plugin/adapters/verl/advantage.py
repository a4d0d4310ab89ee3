"""verl advantage estimator ``tau_grpo``: GRPO whose group mean and std leave out the episodes that trained nothing.

verl's own GRPO (``core_algos.compute_grpo_outcome_advantage``) takes each group's (prompt's ``uid``) mean and
std over every row. ``TauAgentLoop`` returns an episode that must not train (a user-simulator, environment,
judge or policy failure, an engine abort, a prompt too long) with ``response_mask`` all 0 and reward 0.0: that
0 would still enter its group's mean and std and change its siblings' advantages because an endpoint failed.
Here those rows are left out: verl's own GRPO runs on the rows with at least one trainable id, the others
get advantage 0 (they have no trainable id anyway). A group that had several rows and is left with one gets 0
too (nothing to compare it with: slime's ``adapters/slime/advantages.py`` does the same); a group of one row
(``rollout.n=1``) keeps verl's convention. Healthy groups get exactly verl's numbers.

Use it with ``algorithm.adv_estimator=tau_grpo``. verl looks the name up in its registry
(``core_algos.get_adv_estimator_fn``) in the trainer process, so this module must be imported there: set
``VERL_USE_EXTERNAL_MODULES=slime_tau_plugin.adapters.verl.register`` (``import verl`` imports it in every process that
inherits the variable; ``scripts/run_verl_qwen3_4B_tau2.sh`` does). It reads ``algorithm.norm_adv_by_std_in_grpo``
as verl's GRPO does. Both trainers reach it: V1's ``compute_advantage_for_multi_trajectories`` and the batch
trainer's ``compute_advantage`` send every estimator other than ``grpo``/``gae`` through the registry.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, register_adv_est

ESTIMATOR = "tau_grpo"
"""The name in verl's registry (``algorithm.adv_estimator``)."""


@register_adv_est(ESTIMATOR)
def compute_tau_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's GRPO over the rows that train; rows without a trainable id (failed episodes) get 0.

    Returns ``(advantages, returns)``, each shaped like ``response_mask``, as every verl estimator does.
    """
    norm_by_std = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
    trains = response_mask.sum(dim=-1) > 0
    kept = torch.nonzero(trains).flatten().tolist()
    advantages = torch.zeros_like(token_level_rewards)
    if kept:
        kept_index = np.asarray(index, dtype=object)[kept]
        scores, _ = compute_grpo_outcome_advantage(
            token_level_rewards[kept], response_mask[kept], kept_index, epsilon, norm_by_std, config
        )
        advantages[kept] = scores
    group_rows: dict[Any, list[int]] = defaultdict(list)
    for row, uid in enumerate(index):
        group_rows[uid].append(row)
    for rows in group_rows.values():
        survivors = [row for row in rows if bool(trains[row])]
        if len(rows) > 1 and len(survivors) == 1:
            advantages[survivors[0]] = 0.0  # its siblings all failed: nothing to compare it with
    advantages = advantages * response_mask
    return advantages, advantages
