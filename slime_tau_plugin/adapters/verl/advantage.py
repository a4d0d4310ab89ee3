"""verl advantage estimators ``tau_<name>``: verl's estimator ``<name>`` over the episodes that trained.

``TauAgentLoop`` returns an episode that must not train (a user-simulator, environment, judge or policy failure, an
engine abort, a prompt too long) with ``response_mask`` all 0 and reward 0.0. verl's estimators would still count
that 0: GRPO and RLOO in its group's mean (and std), REINFORCE++ in the batch's whitening, so an endpoint's failure
would move its siblings' advantages. ``tau_<name>`` calls verl's own registered estimator ``<name>`` on the rows
with at least one trainable id only (every per-row input sliced alike), and gives the others advantage 0 (they have
no trainable id anyway): each kept row gets exactly what ``<name>`` gives it without the failed rows. One rule is
ours: for an estimator that compares a group (it takes verl's ``index``), a group that had several rows and is left
with one gets 0 (nothing to compare it with: slime's ``adapters/slime/advantages.py`` does the same); a group of one
row (``rollout.n=1``) keeps the estimator's own convention.

Every estimator in verl's registry when this module is imported is wrapped (``grpo``, ``rloo``,
``reinforce_plus_plus``, ``reinforce_plus_plus_baseline``, ``opo``, ``gpg``, ``grpo_passk``, the vectorized ones...),
except those that need inputs verl passes only under their own name or not through the registry at all (``gae``:
values; ``remax``: its greedy baselines; ``gdpo`` and the optimal-token baselines: the batch, old log-probs):
:data:`NOT_WRAPPED`. A user's own estimator is wrapped when its module is imported first:
``VERL_USE_EXTERNAL_MODULES=my_pkg.estimators,slime_tau_plugin.adapters.verl.register`` (verl imports them in
order); the launch check refuses a ``tau_<name>`` it cannot wrap (:func:`wrap_estimator`). verl looks
``algorithm.adv_estimator`` up in its registry (``core_algos.get_adv_estimator_fn``) in the trainer process, so this
module is imported there through ``VERL_USE_EXTERNAL_MODULES`` (``scripts/run_verl_qwen3_4B_tau2.sh`` sets it).
Both trainers reach the wrapper: V1's ``compute_advantage_for_multi_trajectories`` and the batch trainer's
``compute_advantage`` send every estimator other than ``grpo``/``gae`` through the registry with
``token_level_rewards``, ``response_mask``, ``index`` (the prompt ``uid``) and ``config`` (``algorithm``).
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.core_algos import get_adv_estimator_fn, register_adv_est

from slime_tau_plugin.engine.errors import ConfigError

PREFIX = "tau_"
ESTIMATOR = "tau_grpo"
"""The launch script's default (``algorithm.adv_estimator``)."""
PASSED = frozenset({"token_level_rewards", "response_mask", "index", "config"})
"""What verl's ``compute_advantage`` passes every registry estimator (``index`` when rows carry a ``uid``: always)."""
NOT_WRAPPED = {
    "gae": "needs the critic's values, which verl passes only to its own gae branch",
    "remax": "needs greedy-rollout reward_baselines, which TauAgentLoop does not produce",
    "gdpo": "needs the whole batch, which verl passes only under the name gdpo",
    "optimal_token_baseline": "needs old log-probs and sum_pi_squared, which verl passes only under its own name",
    "tir_optimal_token_baseline": "needs old log-probs and sum_pi_squared, which verl passes only under its own name",
}


def wrap_estimator(name: str) -> str:
    """Register ``tau_<name>`` (once) over verl's registered estimator ``name``; returns the new name.

    Raises:
        ConfigError: ``name`` is not in verl's registry, or needs inputs the registry path does not pass.
    """
    wrapped = f"{PREFIX}{name}"
    if wrapped in core_algos.ADV_ESTIMATOR_REGISTRY:
        return wrapped
    if name in NOT_WRAPPED:
        raise ConfigError(
            f"algorithm.adv_estimator={wrapped}: verl's {name} {NOT_WRAPPED[name]}; use tau_grpo or tau_rloo"
        )
    try:
        inner = get_adv_estimator_fn(name)
    except ValueError:
        known = ", ".join(sorted(f"{PREFIX}{n}" for n in wrappable()))
        raise ConfigError(
            f"algorithm.adv_estimator={wrapped}: verl has no estimator {name!r}; expected one of {known}"
        ) from None
    params = inspect.signature(inner).parameters
    required = {
        p.name for p in params.values() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    if not required <= PASSED:
        missing = ", ".join(sorted(required - PASSED))
        raise ConfigError(
            f"algorithm.adv_estimator={wrapped}: verl's {name} needs {missing}, which its registry does not pass"
        )
    register_adv_est(wrapped)(
        _without_failures(inner, groups="index" in params, norm="norm_adv_by_std_in_grpo" in params)
    )
    return wrapped


def wrappable() -> list[str]:
    """verl's registered estimators that ``tau_<name>`` can wrap (ours left out)."""
    return [n for n in core_algos.ADV_ESTIMATOR_REGISTRY if not n.startswith(PREFIX) and n not in NOT_WRAPPED]


def _without_failures(inner: Callable[..., Any], *, groups: bool, norm: bool) -> Callable[..., Any]:
    def estimate(
        token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``inner`` over the rows with a trainable id; 0 for the others (see the module docstring)."""
        if index is not None:
            kwargs["index"] = index
        rows = response_mask.shape[0]
        trains = response_mask.sum(dim=-1) > 0
        kept = torch.nonzero(trains).flatten()
        config = kwargs.get("config")
        if norm and config is not None and "norm_adv_by_std_in_grpo" not in kwargs:
            kwargs["norm_adv_by_std_in_grpo"] = bool(config.get("norm_adv_by_std_in_grpo", True))
        advantages = torch.zeros_like(token_level_rewards)
        returns = torch.zeros_like(token_level_rewards)
        if len(kept):
            sliced = {k: _rows(v, kept, rows) for k, v in kwargs.items()}
            adv, ret = inner(token_level_rewards=token_level_rewards[kept], response_mask=response_mask[kept], **sliced)
            advantages[kept], returns[kept] = adv.to(advantages.dtype), ret.to(returns.dtype)
        if groups and index is not None:
            group_rows: dict[Any, list[int]] = defaultdict(list)
            for row, uid in enumerate(index):
                group_rows[uid].append(row)
            for members in group_rows.values():
                survivors = [row for row in members if bool(trains[row])]
                if len(members) > 1 and len(survivors) == 1:  # its siblings all failed: nothing to compare it with
                    advantages[survivors[0]] = 0.0
                    returns[survivors[0]] = 0.0
        return advantages * response_mask, returns * response_mask

    estimate.__name__ = f"tau_{getattr(inner, '__name__', 'estimator')}"
    estimate.__doc__ = f"{inner.__name__} without the rows that have no trainable id (slime_tau_plugin)."
    return estimate


def _rows(value: Any, kept: torch.Tensor, rows: int) -> Any:
    """``value``'s kept rows when it has one entry per row (a tensor or array), else ``value`` itself."""
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == rows:
        return value[kept.to(value.device)]
    if isinstance(value, np.ndarray) and value.ndim > 0 and value.shape[0] == rows:
        return value[kept.cpu().numpy()]
    return value


for _name in wrappable():
    wrap_estimator(_name)
