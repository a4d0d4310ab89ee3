"""slime all-samples hook: τ metrics over every group a rollout step drew, kept and dropped.

``--rollout-all-samples-process-path slime_tau_plugin.adapters.slime.all_samples.process_all_samples``: slime's
``generate_rollout_async`` calls ``f(args, all_groups, data_source)`` once per training rollout, after the
dynamic filter, with every finished group (``list[list[Sample]]``), including the groups it dropped. slime's
rollout log hook (``metrics.log_rollout``, keys ``rollout/tau/...``) sees only the kept groups, which leaves
out all-pass, all-fail and all-FAILED groups. This hook logs the same per-domain numbers
(:func:`metrics.episode_metrics`) over all of them under ``rollout/tau_all/<benchmark>/<domain>/...``, plus
``failed/<endpoint>`` (the share of episodes that FAILED on each endpoint) and ``rollout/tau_all/groups/*``
(drawn, kept, kept short at the redraw bound, dropped by reason, as ``group_filter.keep_group`` marked them).
It also feeds the run's per-task record (``task_record.py``; ``rollout/tau/record/*``, ``rollout/tau/curriculum/*``).
Imports no slime at import time.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.adapters.slime.group_filter import failure_endpoint
from slime_tau_plugin.adapters.slime.metrics import emit, episode_metrics
from slime_tau_plugin.adapters.slime.redraw import SHORT_PREFIX
from slime_tau_plugin.adapters.slime.sample_view import current_rollout_id
from slime_tau_plugin.adapters.slime.task_record import record_step
from slime_tau_plugin.engine.shared import shared_state

logger = logging.getLogger(__name__)

__all__ = ["ALL_PREFIX", "all_samples_metrics", "process_all_samples"]

ALL_PREFIX = "rollout/tau_all/"
"""Under slime's ``rollout/`` prefix, so wandb plots it against ``rollout/step`` like ``rollout/tau/``."""


def all_samples_metrics(groups: Sequence[Sequence[Any]], default_domain: str = "tau2/retail") -> dict[str, float]:
    """Per-domain metrics, failure causes and group verdicts over every group (a pure function)."""
    flat = [sample for group in groups for sample in group]
    out = episode_metrics(flat, ALL_PREFIX, default_domain=default_domain)
    per_domain: dict[str, Counter[str]] = defaultdict(Counter)
    for sample in flat:
        meta = getattr(sample, "metadata", None)
        if not isinstance(meta, dict) or "termination_reason" not in meta:
            continue  # not ours: episode_metrics skips it too
        domain = f"{meta['benchmark']}/{meta['domain']}" if meta.get("benchmark") and meta.get("domain") else None
        counts = per_domain[domain or default_domain]
        counts["n"] += 1
        endpoint = failure_endpoint(sample)
        if endpoint is not None:
            counts[endpoint] += 1
    for domain, counts in sorted(per_domain.items()):
        n = counts.pop("n")
        out |= {f"{ALL_PREFIX}{domain}/failed/{endpoint}": c / n for endpoint, c in sorted(counts.items())}
    verdicts = Counter(_verdict(group) for group in groups)
    out[f"{ALL_PREFIX}groups/drawn"] = float(len(groups))
    out |= {f"{ALL_PREFIX}groups/{name}": float(c) for name, c in sorted(verdicts.items()) if name is not None}
    return out


def process_all_samples(args: Any, all_groups: list[list[Any]], data_source: Any = None) -> None:
    """slime's ``--rollout-all-samples-process-path`` hook: log :func:`all_samples_metrics` for this step, and
    count the step in the run's per-task record (``task_record.record_step``: the curriculum's input)."""
    groups = [group if isinstance(group, list) else [group] for group in all_groups]
    benchmark = getattr(args, "tau_benchmark", None) or "tau2"
    default_domain = f"{benchmark}/{getattr(args, 'tau_domain', None) or 'retail'}"
    metrics = all_samples_metrics(groups, default_domain)
    rollout_id = _rollout_id(args)
    metrics |= record_step(args, groups, rollout_id, default_domain)
    emit(args, rollout_id, metrics, "rollout/step")


def _verdict(group: Sequence[Any]) -> str | None:
    """``kept``, ``kept_short`` or ``dropped_<reason>`` from ``keep_group``'s mark; None if another filter (or none)
    ran."""
    meta = getattr(group[0], "metadata", None) if group else None
    mark = meta.get("tau_group_filter") if isinstance(meta, dict) else None
    if mark is None:
        return None
    if mark == "kept" or mark.startswith(SHORT_PREFIX):
        return "kept" if mark == "kept" else "kept_short"  # short: slime kept it at the redraw bound
    return f"dropped_{mark}"


class _HookCalls:
    """How many times this process ran the hook: the rollout id when slime does not say it."""

    def __init__(self) -> None:
        self._count = itertools.count()

    def next(self) -> int:
        return next(self._count)


def _rollout_id(args: Any) -> int:
    """slime's current rollout id (set by ``RolloutManager.generate``); else count calls from ``start_rollout_id``."""
    current = current_rollout_id()
    calls = shared_state().part(_HookCalls).next()
    if current is not None:
        return current
    return int(getattr(args, "start_rollout_id", 0) or 0) + calls
