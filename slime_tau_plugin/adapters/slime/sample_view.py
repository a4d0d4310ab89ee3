"""How the slime hooks read a finished sample: did it fail, and which reward does slime train on.

One place for both, so the advantages, the group filter, the failure guard and the all-samples log agree.
Imports no slime.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.metrics.failure_guard import is_failed  # one rule for every trainer

__all__ = ["is_failed", "reward_value"]


def reward_value(args: Any, sample: Any) -> float:
    """The scalar reward slime trains on: ``reward[args.reward_key]`` if that is set, else ``reward``.

    What ``Sample.get_reward_value`` returns, without its hard read of ``args.reward_key`` (slime's own
    hook contract test calls post-processes with an ``args`` that has no attributes).
    """
    key = getattr(args, "reward_key", None)
    reward = sample.reward[key] if key else sample.reward
    return float(reward)
