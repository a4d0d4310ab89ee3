"""What the verl trainer reads back from ``TauAgentLoop``'s ``extra_fields``: τ's step metrics and the failure guard.

verl hands a step's outputs back as one ``extra_fields`` dict per row (V1: the TransferQueue field
``extra_fields``; the batch trainer: one ``non_tensor_batch`` column per key). :func:`episode_views` turns them
into sample-like values (``reporting/step_views.EpisodeView``, TRL's too: ``status``, ``metadata``, ``reward``),
which the run's failure guard reads as it reads slime's samples (``reporting/failure_guard.py``: the same thresholds
and stop line, not a twin). Metric keys follow verl's ``<section>/<name>`` convention and the slime path's names
(``step_views.step_metrics`` with verl's own per-domain numbers): ``tau/<benchmark>/<domain>/<metric>``
(``reward_mean``, ``pass_rate``, ``status/<status>``, ``termination/<reason>``, ``<counter>_per_episode``,
``turns_mean``; the customer review's ``review/*``, e.g. ``review/excluded``: the episodes taken out as
``user_error``, a count, and what the customer cost, ``tau_user/cost_*``: the slime path's own functions) and
``tau/failed/<endpoint>`` (share of the step's episodes) per step; each task's ``tau_pass^k`` at validation
(:func:`task_pass_k`, over the rows that are evidence: a FAILED row, a customer error among them, is left out, as
slime's eval does), which verl logs per data source. Imports no verl.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.result import EpisodeCounters, SampleStatus, TerminationReason
from slime_tau_plugin.engine.review.metrics import review_metrics
from slime_tau_plugin.reporting import step_views
from slime_tau_plugin.reporting.customer_cost import cost_metrics
from slime_tau_plugin.reporting.failure_guard import FailureGuard, FailureGuardSettings
from slime_tau_plugin.reporting.noise import per_task_pass_k
from slime_tau_plugin.reporting.step_views import PREFIX as STEP_PREFIX
from slime_tau_plugin.reporting.step_views import EpisodeView
from slime_tau_plugin.reporting.user_share import user_share_metrics

SUCCESS = 1.0 - 1e-6
"""A reward at or above this is a τ success (reward 1), as in slime's metrics."""
_COUNTER_KEYS = {"tool_calls": "tool_call_counts"} | {
    f.name: f.name for f in dataclasses.fields(EpisodeCounters) if f.name != "tool_calls"
}
"""Counter name in the metric key -> its ``extra_fields`` key (verl reads tool calls as ``tool_call_counts``)."""

__all__ = ["EpisodeView", "episode_view", "episode_views", "observe_step", "step_metrics", "task_pass_k"]


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
    """τ's per-step numbers for verl's logger: per domain, and failures per endpoint over the step."""
    return step_views.step_metrics(views, _domain_numbers, STEP_PREFIX)


def _domain_numbers(group: Sequence[EpisodeView]) -> dict[str, float]:
    n = len(group)
    metas = [v.metadata for v in group]
    out = {
        "samples": float(n),
        "reward_mean": sum(v.reward for v in group) / n,
        "pass_rate": sum(v.reward >= SUCCESS for v in group) / n,
        "turns_mean": sum(_num(m, "model_turns") for m in metas) / n,
    }
    out |= {f"{name}_per_episode": sum(_num(m, key) for m in metas) / n for name, key in _COUNTER_KEYS.items()}
    statuses = Counter(v.status for v in group)
    out |= {f"status/{s.value}": statuses[s] / n for s in SampleStatus if s is not SampleStatus.PENDING}
    ends = Counter(str(m.get("termination_reason")) for m in metas)
    out |= {f"termination/{r.value}": ends[r.value] / n for r in TerminationReason}
    out |= review_metrics(metas, [str(m.get("task_id")) for m in metas])  # as slime's: user_error counted per step
    out |= user_share_metrics(m.get("tau_user_share") or {} for m in metas)  # slime's tau_user/{cache,shared_opening}_*
    return out | cost_metrics(metas)


def _num(meta: Mapping[str, Any], key: str) -> float:
    value = meta.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def task_pass_k(infos: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """One task's τ pass^k for k = 1 .. its episodes, from its rows' ``reward_extra_info`` (``acc``, ``failed``).

    verl's own ``best@k`` is pass@k (any of k succeeds); τ reports pass^k (all k succeed), over the episodes that are
    evidence: a FAILED one (a customer error among them) is left out, as slime's eval does; None where fewer than k
    are left (verl's validation skips None).
    """
    kept = [info for info in infos if not float(info.get("failed") or 0.0) > 0]
    wins = sum(float(info.get("acc") or 0.0) >= SUCCESS for info in kept)
    return {
        f"tau_pass^{k}": per_task_pass_k([wins], [len(kept)], k)[0] if k <= len(kept) else None
        for k in range(1, len(infos) + 1)
    }


def verl_guard_settings(config: TauConfig, groups_per_step: int | None) -> FailureGuardSettings:
    """The slime guard's knobs under verl: ``tau_max_failed_share`` (default 0.5) over the last
    ``tau_failure_window_groups`` groups (default: one step's prompts, ``data.train_batch_size``)."""
    return FailureGuardSettings.from_config(config, groups_per_step)


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
