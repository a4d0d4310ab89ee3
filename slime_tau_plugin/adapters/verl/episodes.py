"""What the verl trainer reads back from ``TauAgentLoop``'s ``extra_fields``: τ's step metrics and the failure guard.

verl hands a step's outputs back as one ``extra_fields`` dict per row (V1: the TransferQueue field
``extra_fields``; the batch trainer: one ``non_tensor_batch`` column per key). :func:`episode_views` turns them
into the sample-like values slime's hooks read (``status``, ``metadata``, ``reward``, ``response_length``,
``loss_mask``), so the τ metrics (``adapters/slime/metrics.episode_metrics``) and the failure guard
(``adapters/slime/group_filter.FailureGuard``, its thresholds and stop line) are the slime path's own, not a twin.
Keys follow verl's ``<section>/<name>`` convention: ``tau/<benchmark>/<domain>/<metric>`` per step,
``tau/failed/<endpoint>`` (share of the step's episodes), and ``val-core/<data_source>/tau/pass^k`` at validation.
Imports no verl.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.adapters.slime.group_filter import (
    DEFAULT_MAX_FAILED_SHARE,
    DEFAULT_WINDOW_GROUPS,
    FailureGuard,
    FailureGuardSettings,
    failure_endpoint,
)
from slime_tau_plugin.adapters.slime.metrics import episode_metrics, is_success, pass_hat_ks
from slime_tau_plugin.engine.config import TauConfig
from slime_tau_plugin.engine.episode import SampleStatus

STEP_PREFIX = "tau/"
FAILED_PREFIX = "tau/failed/"


@dataclass(frozen=True, slots=True)
class EpisodeView:
    """One verl row as slime's hooks read a ``Sample`` (duck-typed: they read only these attributes)."""

    status: SampleStatus
    metadata: dict[str, Any]
    """``extra_fields`` plus ``benchmark``/``domain``/``task_id`` (from ``tau_task``) and ``num_turns``."""
    reward: float
    response_length: int
    loss_mask: list[int] = field(default_factory=list)
    remove_sample: bool = False


def episode_view(extra_fields: Mapping[str, Any], response_mask: Sequence[int] = ()) -> EpisodeView | None:
    """A view of one row's ``extra_fields``; None for a row ``TauAgentLoop`` did not fill."""
    if not isinstance(extra_fields, Mapping) or "termination_reason" not in extra_fields:
        return None
    meta = dict(extra_fields)
    benchmark, domain, split, task_id = (str(extra_fields.get("tau_task") or "///").split("/", 3) + ["", "", ""])[:4]
    meta.update(benchmark=benchmark or None, domain=domain or None, split=split or None, task_id=task_id or None)
    meta["num_turns"] = extra_fields.get("model_turns", 0)
    mask = [int(m) for m in response_mask]
    status = SampleStatus(str(extra_fields.get("status") or SampleStatus.FAILED.value))
    return EpisodeView(status, meta, float(extra_fields.get("tau_reward") or 0.0), len(mask), mask)


def episode_views(
    extra_fields: Iterable[Any], response_masks: Iterable[Sequence[int]] | None = None
) -> list[EpisodeView]:
    """Views of the rows ``TauAgentLoop`` filled, in order (others are skipped)."""
    rows = list(extra_fields)
    masks = list(response_masks) if response_masks is not None else [()] * len(rows)
    views = [episode_view(row, mask) for row, mask in zip(rows, masks, strict=True)]
    return [v for v in views if v is not None]


def step_metrics(views: Sequence[EpisodeView]) -> dict[str, float]:
    """τ's per-step numbers for verl's logger: slime's per-domain metrics plus failures per endpoint."""
    if not views:
        return {}
    metrics = episode_metrics(views, STEP_PREFIX)
    causes = Counter(failure_endpoint(v) for v in views)
    causes.pop(None, None)
    metrics[f"{FAILED_PREFIX}share"] = sum(causes.values()) / len(views)
    metrics |= {f"{FAILED_PREFIX}{endpoint}": count / len(views) for endpoint, count in sorted(causes.items())}
    return metrics


def validation_pass_k(data_sources: Sequence[str], uids: Sequence[Any], successes: Sequence[Any]) -> dict[str, float]:
    """τ's pass^k per data source from verl's validation lists (a task's samples share a ``uid``).

    verl's own ``best@k`` is pass@k (any of k succeeds); τ reports pass^k (all k succeed). ``successes`` is
    the rows' ``reward_extra_info["acc"]`` (None for a row another loop filled: skipped).
    """
    by_source: dict[str, dict[Any, list[int]]] = defaultdict(lambda: defaultdict(list))
    for source, uid, acc in zip(data_sources, uids, successes, strict=True):
        if acc is not None:
            by_source[str(source)][uid].append(int(is_success(float(acc))))
    out: dict[str, float] = {}
    for source, tasks in sorted(by_source.items()):
        wins = [sum(v) for v in tasks.values()]
        trials = [len(v) for v in tasks.values()]
        out |= {f"val-core/{source}/tau/{name}": value for name, value in pass_hat_ks(wins, trials).items()}
    return out


def verl_guard_settings(config: TauConfig, groups_per_step: int | None) -> FailureGuardSettings:
    """The slime guard's knobs under verl: ``tau_max_failed_share`` (default 0.5) over the last
    ``tau_failure_window_groups`` groups (default: one step's prompts, ``data.train_batch_size``)."""
    share = DEFAULT_MAX_FAILED_SHARE if config.max_failed_share is None else config.max_failed_share
    window = config.failure_window_groups or groups_per_step or DEFAULT_WINDOW_GROUPS
    return FailureGuardSettings(float(share), int(window))


def observe_step(guard: FailureGuard, uids: Sequence[Any], views: Sequence[EpisodeView | None]) -> None:
    """Feed one step's rows to ``guard``, one group per prompt ``uid`` (rows another loop filled are skipped).

    Raises:
        FailureGuardError: too many recent episodes FAILED on one endpoint (the one-line stop of the slime path).
    """
    groups: dict[Any, list[EpisodeView]] = defaultdict(list)
    for uid, view in zip(uids, views, strict=True):
        if view is not None:
            groups[uid].append(view)
    for group in groups.values():
        guard.observe(group)
