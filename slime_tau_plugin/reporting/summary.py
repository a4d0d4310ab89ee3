"""What a set of finished episodes says: pass^k, per-domain numbers, and which episodes are no evidence.

One module for every front door's numbers: slime's log hooks (``adapters/slime/metrics.py``), verl's, and the
CLI's summary (``tools/cli/play/runner.py``) read the same samples the same way, so one run gives one pass^k. A sample
is anything with slime's field names (``metadata``, ``reward``, ``status``, ``response_length``, ``loss_mask``):
slime's ``Sample``, the CLI's ``RolloutSample``, a row read back.

One rule for pass^k: a FAILED episode (an endpoint, the environment or the judge failed) and one ended by a
run-level limit (the deadline, the user's token budget) are no evidence about the model, so they are left out of
pass^k and its interval, and their count is reported beside it (``left_out``). Mean reward and pass rate in
:func:`domain_summary` cover every sample, as slime's own metrics do; :func:`pass_k_summary` covers the evidence.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from slime_tau_plugin.engine.episode.result import EpisodeCounters, SampleStatus, TerminationReason
from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.engine.review.metrics import is_customer_error, review_metrics
from slime_tau_plugin.reporting.customer_cost import cost_metrics
from slime_tau_plugin.reporting.noise import pass_k_intervals

logger = logging.getLogger(__name__)

SUCCESS_THRESHOLD = 1.0 - 1e-6
"""A reward at or above this is a success (τ's pass: reward 1)."""

_TIMES = (("policy", "time_policy_s"), ("env", "time_env_s"), ("user", "time_user_s"))
_NET = (
    "net_retries",
    "outage_wait_s",
    "slot_wait_s",
    "user_requests",
    "user_prompt_tokens",
    "user_completion_tokens",
    "user_latency_s",
    "user_cache_hits",
    "user_opening_shared",
)
"""Per-episode network numbers (``endpoints.NetStats``): what outages cost and what the LLM user costs."""
_COUNTERS = tuple(f.name for f in dataclasses.fields(EpisodeCounters))
_STATUSES = tuple(s for s in SampleStatus if s is not SampleStatus.PENDING)


def pass_hat_k(successes: Sequence[int], trials: int | Sequence[int], k: int) -> float:
    """τ's pass^k: mean over tasks of C(c, k) / C(n, k), c = successes of a task out of its n trials.

    ``trials`` is one n for every task, or one n per task (the estimate stays unbiased per task when
    counts differ; k must then not exceed the smallest n).

    Raises:
        ValueError: no tasks, k outside 1..min(n), or a success count outside 0..n.
    """
    per_task = [trials] * len(successes) if isinstance(trials, int) else list(trials)
    if not successes or len(per_task) != len(successes):
        raise ValueError(f"need one trial count per task; got {len(successes)} tasks and {len(per_task)} counts")
    if not 1 <= k <= min(per_task):
        raise ValueError(f"k={k} must be between 1 and the number of trials per task ({min(per_task)})")
    for c, n in zip(successes, per_task, strict=True):
        if not 0 <= c <= n:
            raise ValueError(f"a task has {c} successes out of {n} trials; expected 0..{n}")
    value = sum(math.comb(c, k) / math.comb(n, k) for c, n in zip(successes, per_task, strict=True)) / len(successes)
    assert 0.0 <= value <= 1.0 + 1e-12, value
    return min(value, 1.0)


def is_success(reward: float) -> bool:
    return reward >= SUCCESS_THRESHOLD


def tau_reward(sample: Any) -> float:
    """τ's own reward of a sample: ``metadata["task_reward"]`` when the training reward was shaped
    (``tau_reward_shaping``), else ``sample.reward``. Every pass rate and mean reward here uses it."""
    meta = getattr(sample, "metadata", None) or {}
    value = meta.get("task_reward") if isinstance(meta, dict) else None
    return float(value if value is not None else (getattr(sample, "reward", None) or 0.0))


def per_task_outcomes(samples: Iterable[Any]) -> tuple[list[int], list[int]]:
    """Successes and trials of each τ task (by ``task_id``/``task_index``), in task order: pass^k's input."""
    table = per_task_table(samples)
    return [c for c, _ in table.values()], [n for _, n in table.values()]


def per_task_table(samples: Iterable[Any]) -> dict[str, list[int]]:
    """``{task_id: [successes, trials]}``: what ``show --compare`` pairs two runs on."""
    successes: Counter[str] = Counter()
    trials: Counter[str] = Counter()
    for s in samples:
        task = _task_of(s)
        trials[task] += 1
        successes[task] += is_success(tau_reward(s))
    return {task: [successes[task], trials[task]] for task in sorted(trials)}


def pass_hat_ks(successes: Sequence[int], trials: Sequence[int]) -> dict[str, float]:
    """``pass^1`` .. ``pass^n`` for n = the fewest trials any task has (what the data supports)."""
    return {f"pass^{k}": pass_hat_k(successes, trials, k) for k in range(1, min(trials) + 1)}


def domain_summary(group: Sequence[Any]) -> dict[str, float]:
    """The per-domain numbers of a group of samples: slime's metrics and the CLI's summary use these names."""
    n = len(group)
    metas = [s.metadata for s in group]
    rewards = [tau_reward(s) for s in group]
    stats: dict[str, float] = {
        "samples": float(n),
        "reward_mean": sum(rewards) / n,
        "pass_rate": sum(is_success(r) for r in rewards) / n,
        "turns_mean": sum(_num(m, "num_turns") for m in metas) / n,
    }
    stats |= {f"{key}_per_episode": sum(_num(m, key) for m in metas) / n for key in _COUNTERS}
    stats |= {
        f"net/{key}_per_episode": sum(_num(m, key) for m in metas) / n for key in _NET if any(key in m for m in metas)
    }
    stats |= replica_metrics(metas, n)
    ends = Counter(str(m.get("termination_reason", "?")) for m in metas)
    known = [reason.value for reason in TerminationReason]
    stats |= {f"termination/{reason}": ends[reason] / n for reason in [*known, *sorted(set(ends) - set(known))]}
    modes = Counter(str(m["template_mode"]) for m in metas if m.get("template_mode"))  # templates.TemplateMode
    stats |= {f"template_mode/{mode}": modes[mode] / n for mode in sorted(modes)}
    statuses = Counter(_status_name(s.status) for s in group)
    stats |= {f"status/{status.value}": statuses[status.value] / n for status in _STATUSES}
    wall = sum(_num(m, "episode_wall_s") for m in metas)
    if wall > 0:
        parts = {part: sum(_num(m, key) for m in metas) / wall for part, key in _TIMES}
        stats |= {f"time/{part}_share": share for part, share in parts.items()}
        stats["time/other_share"] = max(0.0, 1.0 - sum(parts.values()))
        stats["time/episode_wall_s_mean"] = wall / n
    response = sum(int(getattr(s, "response_length", 0) or 0) for s in group)
    trainable = sum(sum(getattr(s, "loss_mask", None) or []) for s in group)
    stats["tokens/response_mean"] = response / n
    stats["tokens/trainable_mean"] = trainable / n
    stats["tokens/trainable_fraction"] = trainable / response if response else 0.0
    stats |= review_metrics(metas, [_task_of(s) for s in group])
    stats |= cost_metrics(metas)  # tau_user/cost_*: what the customer and its review cost
    stats["nl_assertions_excluded_rate"] = sum("nl_assertions" in (m.get("reward_info") or {}) for m in metas) / n
    return stats


def replica_metrics(metas: Sequence[dict[str, Any]], n: int) -> dict[str, float]:
    """``net/replica/<role> <url>/{requests,failures}_per_episode`` where a role has several replicas: is the
    load balanced, and which replica fails."""
    out: dict[str, float] = {}
    for kind in ("requests", "failures"):
        totals: Counter[str] = Counter()
        for meta in metas:
            counts = meta.get(f"replica_{kind}")
            totals.update(counts if isinstance(counts, dict) else {})
        out |= {f"net/replica/{name}/{kind}_per_episode": count / n for name, count in sorted(totals.items())}
    return out


def pass_k_bounds(successes: Sequence[int], trials: Sequence[int]) -> dict[str, float]:
    """``pass^k/ci95_low`` and ``pass^k/ci95_high``: the seeded 95% bootstrap interval over tasks (``noise.py``)."""
    out: dict[str, float] = {}
    for name, interval in pass_k_intervals(successes, trials).items():
        out |= {f"{name}/ci95_low": interval.low, f"{name}/ci95_high": interval.high}
    return out


def _task_of(sample: Any) -> str:
    task = task_id_of(sample.metadata)
    return task if task is not None else f"prompt:{getattr(sample, 'prompt', None)}"


def _status_name(status: Any) -> str:
    """``completed``/``truncated``/... from slime's enum, our enum, or a row's value string."""
    name = getattr(status, "name", None)
    if isinstance(name, str):
        return name.lower()
    value = getattr(status, "value", status)
    return str(value).lower()


def _num(meta: dict[str, Any], key: str) -> float:
    value = meta.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def left_out(sample: Any) -> bool:
    """No evidence about the model: FAILED, or removed by its end (a failure or a run-level limit:
    ``TerminationReason.is_removed``)."""
    if _status_name(getattr(sample, "status", None)) == "failed":
        return True
    reason = (getattr(sample, "metadata", None) or {}).get("termination_reason")
    try:
        return TerminationReason(reason).is_removed
    except ValueError:
        return False


def pass_k_summary(group: Sequence[Any], where: str = "") -> dict[str, float]:
    """``pass^1..pass^n`` with their 95% intervals over the episodes that are evidence (not :func:`left_out`),
    ``tasks``, ``trials_per_task`` (the fewest) and ``left_out`` (how many were not counted); n = the fewest trials
    any task has among those. Empty of pass^k when no episode is evidence (``left_out`` still says why). An episode
    the customer review took out (``user_error``) is one of them, also counted as ``review/excluded_from_pass_k``."""
    counted = [s for s in group if not left_out(s)]
    out: dict[str, float] = {"left_out": float(len(group) - len(counted))}
    customer = sum(is_customer_error(getattr(s, "metadata", None)) for s in group)
    if customer:
        out["review/excluded_from_pass_k"] = float(customer)
    if not counted:
        return out | {"tasks": 0.0, "trials_per_task": 0.0}
    wins, counts = per_task_outcomes(counted)
    n = min(counts)
    if n != max(counts):
        logger.warning(
            "tau metrics %s: tasks have %d to %d samples each; pass^k is reported for k=1..%d only",
            where,
            n,
            max(counts),
            n,
        )
    return (
        out
        | pass_hat_ks(wins, counts)
        | pass_k_bounds(wins, counts)
        | {
            "tasks": float(len(counts)),
            "trials_per_task": float(n),
        }
    )
