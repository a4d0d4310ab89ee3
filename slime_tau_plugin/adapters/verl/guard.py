"""The failure guard under verl's batch trainer (``trainer.use_v1=false``), in the agent-loop worker.

The batch trainer awaits every agent loop of a step (``AgentLoopWorker.generate_sequences``): an exception from
``TauAgentLoop.run`` fails the step's ``ray.get`` and stops the run. So each agent-loop worker process keeps the
slime guard's window (``reporting/failure_guard.FailureGuard``: the same thresholds and stop line) over the
episodes it played, one per observation: the window holds ``tau_failure_window_groups`` x ``rollout.n``
episodes (default: one step's, ``data.train_batch_size`` x ``rollout.n``, spread over the workers). V1's trainer
settles failed sessions without stopping, so there the guard runs in the trainer's replay buffer (``sampler.py``)
over whole groups instead. Imports no verl.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slime_tau_plugin.adapters.verl.episodes import episode_view, verl_guard_settings
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.reporting.failure_guard import (
    FailureGuardError,
    FailureGuardSettings,
    GuardWindow,
)

logger = logging.getLogger(__name__)


class _WorkerWindow(GuardWindow):
    """verl's window in an agent-loop worker (agent loops are built per row; the window outlives them)."""


def batch_path_settings(config: TauConfig, trainer_config: Any) -> FailureGuardSettings:
    """The guard's settings in episodes (one episode per observation): groups x ``rollout.n``."""
    n = int(trainer_config.actor_rollout_ref.rollout.get("n", 1) or 1)
    per_step = trainer_config.get("data", {}).get("train_batch_size")
    groups = verl_guard_settings(config, int(per_step) if per_step else None)
    return FailureGuardSettings(groups.max_failed_share, groups.window_groups * n, groups.max_customer_error_share)


def guard_batch_path(config: TauConfig, trainer_config: Any, extra_fields: Mapping[str, Any]) -> None:
    """Count one finished episode in this worker's window.

    Raises:
        FailureGuardError: too many recent episodes FAILED on one endpoint (stops the batch trainer's run).
    """
    view = episode_view(extra_fields)
    if view is None:
        return
    window = shared_state().part(_WorkerWindow)
    guard = window.guard_for(batch_path_settings(config, trainer_config))
    try:
        guard.observe([view])
    except FailureGuardError as exc:
        logger.error("%s", exc)
        raise


def reset_batch_path_guard() -> None:
    """Forget this process's window (a new run in the same process, or a test)."""
    shared_state().part(_WorkerWindow).reset()
