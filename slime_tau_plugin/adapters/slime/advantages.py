"""slime reward post-process: group-normalised advantages over the episodes that did not fail.

``--custom-reward-post-process-path slime_tau_plugin.adapters.slime.advantages.post_process_rewards`` replaces slime's
``RolloutManager._post_process_rewards`` (``slime/ray/rollout.py``), called as ``f(args, samples)`` on the
flat sample list of one rollout step and returning ``(raw_rewards, rewards)``, one value per sample.

slime's own version centres each group on its mean (and divides by its std for GRPO/GSPO/CISPO) over
*every* sample: a FAILED episode (reward 0, ``remove_sample``) only loses its loss mask, so its 0 still
pulls the group mean down and inflates the advantage of the episodes that succeeded. Here the mean and
std are taken over the samples that did not fail, and a failed sample gets 0. Everything else is slime's
formula: the same estimators, ``rewards_normalization`` and ``grpo_std_normalization`` switches, groups of
``n_samples_per_prompt`` when the batch is full (else one group, as slime does), torch's unbiased std and
``+ 1e-6``. A group with one surviving sample gets 0 (slime's torch std of one value is NaN).

slime calls it every step in every rollout mode, so it also feeds the run's failure guard the groups no dynamic
filter saw (slime's fully-async rollout runs none): a dead endpoint stops those runs too (``group_filter.py``).
And it is where ``tau_max_weight_lag`` masks stale turns (``weight_lag.mask_for_training``): slime's
``_convert_samples_to_train_data`` calls it on the samples it trains and reads their loss masks after it returns.
What "failed" means for a sample and how its reward is read live in ``sample_view.py``. Imports no slime.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.adapters.slime.group_filter import observe_unfiltered
from slime_tau_plugin.adapters.slime.sample_view import current_rollout_id, is_failed, reward_value
from slime_tau_plugin.adapters.slime.weight_lag import mask_for_training
from slime_tau_plugin.engine.config.tau_config import coerce_field

__all__ = ["GROUP_ESTIMATORS", "STD_ESTIMATORS", "group_slices", "is_failed", "post_process_rewards", "reward_value"]

GROUP_ESTIMATORS = ("grpo", "gspo", "cispo", "reinforce_plus_plus_baseline")
"""Estimators whose rewards slime centres per group (``_post_process_rewards``)."""
STD_ESTIMATORS = ("grpo", "gspo", "cispo")
"""Estimators that also divide by the group std unless ``--disable-grpo-std-normalization``."""
STD_EPS = 1e-6


def group_slices(args: Any, count: int) -> list[range]:
    """slime's grouping: consecutive ``n_samples_per_prompt`` blocks if the batch is full, else one group."""
    n = int(getattr(args, "n_samples_per_prompt", 1) or 1)
    batch = int(getattr(args, "rollout_batch_size", 0) or 0)
    if count and count == n * batch:
        return [range(start, start + n) for start in range(0, count, n)]
    return [range(count)] if count else []


def post_process_rewards(args: Any, samples: Sequence[Any]) -> tuple[list[float], list[float]]:
    """slime's ``_post_process_rewards`` with failed samples left out of every group statistic.

    Returns ``(raw_rewards, rewards)``: the rewards as the samples hold them (slime logs them as
    ``raw_reward``) and what slime turns into advantages (a failed sample's is 0, whatever the estimator).
    With ``tau_max_weight_lag`` it first zeroes the loss mask and log-probs of turns sampled more than that many
    weight versions before the trainer's (slime reads the masks from these samples next).

    Raises:
        ConfigError: ``tau_max_weight_lag`` is not a whole number >= 0.
    """
    max_lag = coerce_field("max_weight_lag", getattr(args, "tau_max_weight_lag", None))
    mask_for_training(samples, current_rollout_id(), max_lag)
    observe_unfiltered(args, [[samples[i] for i in group] for group in group_slices(args, len(samples))])
    raw = [reward_value(args, s) for s in samples]
    failed = [is_failed(s) for s in samples]
    estimator = getattr(args, "advantage_estimator", "grpo")
    if estimator not in GROUP_ESTIMATORS or not getattr(args, "rewards_normalization", True):
        return raw, [0.0 if bad else r for r, bad in zip(raw, failed, strict=True)]
    divide = estimator in STD_ESTIMATORS and getattr(args, "grpo_std_normalization", True)
    out = [0.0] * len(raw)
    for group in group_slices(args, len(raw)):
        kept = [i for i in group if not failed[i]]
        if not kept:
            continue
        mean = math.fsum(raw[i] for i in kept) / len(kept)
        centred = {i: raw[i] - mean for i in kept}
        if divide:
            std = _unbiased_std(list(centred.values()))
            centred = {i: (v / (std + STD_EPS) if len(kept) > 1 else 0.0) for i, v in centred.items()}
        for i, value in centred.items():
            out[i] = value
    return raw, out


def _unbiased_std(centred: list[float]) -> float:
    """torch's default ``std`` (Bessel's correction) of values already centred on their mean."""
    if len(centred) < 2:
        return 0.0
    return math.sqrt(math.fsum(v * v for v in centred) / (len(centred) - 1))
