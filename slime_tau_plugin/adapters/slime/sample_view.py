"""How the slime hooks read a finished sample (did it fail, which reward slime trains on) and slime's current step.

One place for these, so the advantages, the group filter, the failure guard and the all-samples log agree.
Imports no slime (slime's rollout id is read from its module only if slime loaded it).
"""

from __future__ import annotations

import sys
from typing import Any

from slime_tau_plugin.reporting.failure_guard import is_failed  # one rule for every trainer

__all__ = ["current_rollout_id", "is_failed", "reward_value"]


def reward_value(args: Any, sample: Any) -> float:
    """The scalar reward slime trains on: ``reward[args.reward_key]`` if that is set, else ``reward``.

    What ``Sample.get_reward_value`` returns, without its hard read of ``args.reward_key`` (slime's own
    hook contract test calls post-processes with an ``args`` that has no attributes).
    """
    key = getattr(args, "reward_key", None)
    reward = sample.reward[key] if key else sample.reward
    return float(reward)


def current_rollout_id() -> int | None:
    """slime's rollout id of the step in progress (``RolloutManager.generate`` sets it before it generates and keeps
    it while it logs and converts the samples); None outside slime."""
    hooks = sys.modules.get("slime.rollout.sample_hooks")
    current = getattr(hooks, "_current_rollout_id", None)
    return current if isinstance(current, int) and not isinstance(current, bool) else None
