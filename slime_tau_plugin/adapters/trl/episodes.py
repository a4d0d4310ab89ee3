"""What a TRL generation batch's episodes say, over every process: τ's step metrics and the failure guard's input.

Each process plays its own rows; an ``EpisodeView`` (``reporting/step_views.py``, verl's too) is one row as slime's
hooks read a ``Sample`` (``status``,
``metadata``, ``reward``, ``response_length``, ``loss_mask``), small and picklable, so the rollout gathers every
process's views (accelerate's ``gather_object``) and each process then computes the same numbers and takes the same
stop decision: no process stops alone while the others wait in TRL's next collective call.

Metric names are slime's (``reporting/summary.domain_summary``, the names slime's ``rollout/tau/...`` hook logs)
under TRL's convention ``<section>/<name>``: ``tau/<benchmark>/<domain>/<metric>`` (``reward_mean``, ``pass_rate``,
``status/<status>``, ``termination/<reason>``, ``<counter>_per_episode``, ``tokens/*``, ``time/*``, ``review/*``,
``tau_user/cost_*``), ``tau/tau_user/{cache,shared_opening}_*`` and ``tau/failed/share``, ``tau/failed/<endpoint>``
(share of the batch's episodes). TRL adds ``eval_`` in evaluation. Imports no TRL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.cost import COST_KEY
from slime_tau_plugin.engine.episode.result import SampleStatus
from slime_tau_plugin.engine.workers.messages import FinishedEpisode
from slime_tau_plugin.reporting import step_views
from slime_tau_plugin.reporting.failure_guard import FailureGuard, FailureGuardSettings
from slime_tau_plugin.reporting.step_views import PREFIX, EpisodeView
from slime_tau_plugin.reporting.summary import domain_summary
from slime_tau_plugin.reporting.user_share import user_share_metrics

__all__ = ["EpisodeView", "episode_view", "guard_settings", "observe_batch", "step_metrics"]


def episode_view(finished: FinishedEpisode, group: int) -> EpisodeView:
    """The view of one played row in global group ``group`` (``groups.RowPlace.group``; slime's metadata names; no
    messages, so it stays small to gather)."""
    result, traj = finished.result, finished.trajectory
    task = result.task
    meta: dict[str, Any] = {
        "benchmark": task.benchmark,
        "domain": task.domain,
        "split": task.split,
        "task_id": task.task_id,
        "termination_reason": result.termination.value,
        "num_turns": result.num_turns,
        **result.counters.as_dict(),
        "template_mode": result.template_mode,
        "reward_info": result.reward_info,
        **result.timings.as_metadata(),
        **result.net_info,
        COST_KEY: result.cost.as_metadata(),
    }
    if result.error:
        meta["error"] = result.error
    if result.failed_endpoint is not None:
        meta["failed_endpoint"] = result.failed_endpoint.value
    if result.review is not None:
        meta["tau_review"] = result.review.as_metadata()
    status = result.termination.status
    mask = list(traj.loss_mask)
    return EpisodeView(status, meta, float(result.reward), len(mask), mask, status is SampleStatus.FAILED, group)


def step_metrics(views: Sequence[EpisodeView]) -> dict[str, float]:
    """τ's numbers for one generation batch (every process's rows), keyed as the module docstring says."""
    if not views:
        return {}
    metrics = step_views.step_metrics(views, domain_summary, PREFIX)
    return metrics | {f"{PREFIX}{name}": float(v) for name, v in user_share_metrics(v.metadata for v in views).items()}


def guard_settings(config: TauConfig, groups_per_batch: int) -> FailureGuardSettings:
    """The slime guard's knobs under TRL: ``tau_max_failed_share`` (default 0.5) over the last
    ``tau_failure_window_groups`` groups (default: one generation batch's groups)."""
    return FailureGuardSettings.from_config(config, groups_per_batch)


def observe_batch(guard: FailureGuard, views: Sequence[EpisodeView]) -> None:
    """Feed one generation batch to ``guard``, one observation per global group, in order.

    Raises:
        FailureGuardError: too many recent episodes FAILED on one endpoint (the slime path's one-line stop).
    """
    groups: dict[int, list[EpisodeView]] = defaultdict(list)
    for view in views:
        groups[view.group].append(view)
    for _, group in sorted(groups.items()):
        guard.observe(group)
