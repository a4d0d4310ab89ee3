"""What a TRL generation batch's episodes say, over every process: τ's step metrics and the failure guard's input.

Each process plays its own rows; :class:`EpisodeView` is one row as slime's hooks read a ``Sample`` (``status``,
``metadata``, ``reward``, ``response_length``, ``loss_mask``), small and picklable, so the rollout gathers every
process's views (accelerate's ``gather_object``) and each process then computes the same numbers and takes the same
stop decision: no process stops alone while the others wait in TRL's next collective call.

Metric names are slime's (``engine/metrics/summary.domain_summary``, the names slime's ``rollout/tau/...`` hook logs)
under TRL's convention ``<section>/<name>``: ``tau/<benchmark>/<domain>/<metric>`` (``reward_mean``, ``pass_rate``,
``status/<status>``, ``termination/<reason>``, ``<counter>_per_episode``, ``tokens/*``, ``time/*``, ``review/*``,
``tau_user/cost_*``), ``tau/tau_user/{cache,shared_opening}_*`` and ``tau/failed/share``, ``tau/failed/<endpoint>``
(share of the batch's episodes). TRL adds ``eval_`` in evaluation. Imports no TRL.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.cost import COST_KEY
from slime_tau_plugin.engine.episode.result import SampleStatus
from slime_tau_plugin.engine.metrics.failure_guard import (
    FailureGuard,
    FailureGuardSettings,
    failure_endpoint,
)
from slime_tau_plugin.engine.metrics.summary import domain_summary
from slime_tau_plugin.engine.metrics.user_share import user_share_metrics
from slime_tau_plugin.engine.workers.messages import FinishedEpisode

PREFIX = "tau/"
FAILED_PREFIX = "tau/failed/"


@dataclass(frozen=True, slots=True)
class EpisodeView:
    """One row of the global batch, as the metrics and the failure guard read a sample."""

    group: int
    """Its global GRPO group (``groups.RowPlace.group``)."""
    status: SampleStatus
    metadata: dict[str, Any]
    reward: float
    """τ's reward (unshaped)."""
    response_length: int
    loss_mask: list[int] = field(default_factory=list)
    remove_sample: bool = False


def episode_view(finished: FinishedEpisode, group: int) -> EpisodeView:
    """The view of one played row (slime's metadata names; no messages, so it stays small to gather)."""
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
    return EpisodeView(group, status, meta, float(result.reward), len(mask), mask, status is SampleStatus.FAILED)


def step_metrics(views: Sequence[EpisodeView]) -> dict[str, float]:
    """τ's numbers for one generation batch (every process's rows), keyed as the module docstring says."""
    if not views:
        return {}
    by_domain: dict[str, list[EpisodeView]] = defaultdict(list)
    for view in views:
        by_domain[f"{view.metadata['benchmark']}/{view.metadata['domain']}"].append(view)
    metrics: dict[str, float] = {}
    for domain, group in sorted(by_domain.items()):
        metrics |= {f"{PREFIX}{domain}/{name}": float(value) for name, value in domain_summary(group).items()}
    metrics |= {f"{PREFIX}{name}": float(v) for name, v in user_share_metrics(v.metadata for v in views).items()}
    causes = Counter(failure_endpoint(v) for v in views)
    causes.pop(None, None)
    metrics[f"{FAILED_PREFIX}share"] = sum(causes.values()) / len(views)
    metrics |= {f"{FAILED_PREFIX}{endpoint}": n / len(views) for endpoint, n in sorted(causes.items())}
    return metrics


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
