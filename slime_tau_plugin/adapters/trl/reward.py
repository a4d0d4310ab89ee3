"""τ's reward as a TRL reward function: ``GRPOTrainer(reward_funcs=[tau_reward], rollout_func=TauRollout())``.

TRL calls each reward function with the completions and every field the rollout function returned; the
episode was already scored by τ when it ended (``rollout.TauRollout``'s ``tau_score``), so this reads it back.
None (an episode that must not train) is TRL's "unscorable": left out of the group statistics, advantage 0.
It also hands τ's step metrics (``tau_step_metrics``, computed over every process's rows) to TRL's own logger
through the ``log_metric`` TRL passes to reward functions: TRL averages them over processes (each holds the same
numbers) and logs them with its own, ``eval_``-prefixed in evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError


def tau_reward(
    completions: list[Any],
    tau_score: list[float | None] | None = None,
    tau_step_metrics: list[dict[str, float]] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    **_: Any,
) -> list[float | None]:
    """τ's reward per completion (``tau_reward_shaping`` applied in training); None where it must not train.

    Raises:
        ConfigError: the trainer has no ``rollout_func=TauRollout(...)``, so no episode was scored.
    """
    if tau_score is None:
        raise ConfigError("tau_reward needs the tau_score field: train with rollout_func=TauRollout(...)")
    if log_metric is not None and tau_step_metrics:
        for name, value in tau_step_metrics[0].items():  # one dict for the batch, handed to every row
            log_metric(name, float(value))
    return list(tau_score)
