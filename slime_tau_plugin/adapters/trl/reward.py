"""τ's reward as a TRL reward function: ``GRPOTrainer(reward_funcs=[tau_reward], rollout_func=TauRollout())``.

TRL calls each reward function with the completions and every field the rollout function returned; the
episode was already scored by τ when it ended (``rollout.TauRollout``'s ``tau_score``), so this reads it back.
None (an episode that must not train) is TRL's "unscorable": left out of the group statistics, advantage 0.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.errors import ConfigError


def tau_reward(completions: list[Any], tau_score: list[float | None] | None = None, **_: Any) -> list[float | None]:
    """τ's reward per completion (``tau_reward_shaping`` applied in training); None where it must not train.

    Raises:
        ConfigError: the trainer has no ``rollout_func=TauRollout(...)``, so no episode was scored.
    """
    if tau_score is None:
        raise ConfigError("tau_reward needs the tau_score field: train with rollout_func=TauRollout(...)")
    return list(tau_score)
