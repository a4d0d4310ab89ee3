"""slime's log hooks for τ episodes: per-domain reward, pass^k, turns, errors, ends, time and tokens.

Two front doors, each a slime flag::

    --custom-rollout-log-function-path      slime_tau_plugin.adapters.slime.metrics.log_rollout
    --custom-eval-rollout-log-function-path slime_tau_plugin.adapters.slime.metrics.log_eval

Both return False, so slime still logs its own metrics. Keys follow slime's naming, because slime's wandb
setup binds ``rollout/*`` to the step metric ``rollout/step`` and ``eval/*`` to ``eval/step``:
``rollout/tau/<benchmark>/<domain>/<metric>`` and ``eval/tau/<dataset>/<benchmark>/<domain>/<metric>``.
The numbers come from :func:`episode_metrics`, a pure function of the samples. Only samples our
``generate`` filled (``metadata["termination_reason"]`` present) are counted; any other sample is skipped.
slime is imported inside the hooks only (it moved ``logging_utils`` from ``slime.utils`` to
``slime.observability`` in 2026-08; both are tried); without slime the metrics go to this module's logger.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from slime_tau_plugin.adapters.slime.partial import abort_tally, resume_metrics
from slime_tau_plugin.engine.episode import EpisodeCounters, SampleStatus, TerminationReason
from slime_tau_plugin.engine.noise import pass_k_intervals
from slime_tau_plugin.engine.review.metrics import is_customer_error, review_metrics
from slime_tau_plugin.engine.reward_breakdown import reward_breakdown_metrics
from slime_tau_plugin.engine.task_ref import task_id_of
from slime_tau_plugin.engine.user_budget import user_token_ledger

logger = logging.getLogger(__name__)

ROLLOUT_PREFIX = "rollout/tau/"
EVAL_PREFIX = "eval/tau/"
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


def episode_metrics(
    samples: Iterable[Any], prefix: str, *, with_pass_k: bool = False, default_domain: str = "tau2/retail"
) -> dict[str, float]:
    """Per-domain metrics of the samples our ``generate`` filled, keyed ``<prefix><benchmark>/<domain>/<name>``.

    ``with_pass_k`` adds ``pass^1..pass^n`` (n = trials per task found in the data, the smallest if tasks
    differ; tasks are told apart by ``task_id``/``task_index``, else the prompt). ``default_domain`` names
    samples whose metadata carries no benchmark/domain (a row that relied on the ``tau_*`` defaults).
    """
    groups: dict[str, list[Any]] = defaultdict(list)
    skipped = 0
    for sample in samples:
        if _is_ours(sample):
            groups[_domain_of(sample.metadata, default_domain)].append(sample)
        else:
            skipped += 1
    if skipped:
        logger.debug("tau metrics: skipped %d samples without our metadata", skipped)
    out: dict[str, float] = {}
    for domain, group in sorted(groups.items()):
        stats = domain_summary(group)
        if with_pass_k:
            stats |= _pass_k_metrics(group, f"{prefix}{domain}")
        out |= {f"{prefix}{domain}/{name}": value for name, value in stats.items()}
    ours = [sample for group in groups.values() for sample in group]
    return out | reward_breakdown_metrics(ours, prefix, default_domain)


def log_rollout(
    rollout_id: int, args: Any, samples: Sequence[Any], rollout_extra_metrics: Any, rollout_time: float
) -> bool:
    """slime's ``--custom-rollout-log-function-path`` hook; returns False so slime's own logging runs too.

    Adds ``rollout/tau/partial/*``: episodes slime aborted since the last step (thrown away or suspended,
    ``partial.AbortTally``) and, over the step's samples, the share resumed, turns reused, off-policy ids; and
    ``rollout/tau/user_tokens/{step,total,refused}``: the LLM user's tokens this step and this run, and the requests
    its budget refused (``user_budget.py``). This hook ends the budget's step.
    """
    flat = _flatten(samples)
    metrics = episode_metrics(flat, ROLLOUT_PREFIX, default_domain=_default_domain(args))
    ours = [s.metadata for s in flat if _is_ours(s)]
    tally = abort_tally().take()
    spent = user_token_ledger().end_step()  # the step ends here: its user-token budget starts again
    if any(spent.values()):
        metrics |= {f"{ROLLOUT_PREFIX}{name}": value for name, value in spent.items()}
    if ours or any(tally.values()):
        partial = tally | resume_metrics(ours) | worker_metrics(ours)
        metrics |= {f"{ROLLOUT_PREFIX}{name}": value for name, value in partial.items()}
    emit(args, rollout_id, metrics, "rollout/step")
    return False


def worker_metrics(metas: Sequence[dict[str, Any]]) -> dict[str, float]:
    """With ``tau_episode_workers``: how many workers played the step, and the share of episodes played again
    because their worker died (none without workers)."""
    workers = {m["tau_worker"].split(" pid ")[0] for m in metas if m.get("tau_worker")}
    if not workers:
        return {}
    replayed = sum(1 for m in metas if m.get("tau_worker_lost"))
    return {"workers/count": float(len(workers)), "workers/replayed": replayed / len(metas)}


def log_eval(rollout_id: int, args: Any, data: dict[str, dict[str, Any]], extra_metrics: Any) -> bool:
    """slime's ``--custom-eval-rollout-log-function-path`` hook (``data = {dataset: {"samples": [...], ...}}``)."""
    metrics: dict[str, float] = {}
    for name, result in data.items():
        samples = _flatten(result.get("samples") or [])
        metrics |= episode_metrics(
            samples, f"{EVAL_PREFIX}{name}/", with_pass_k=True, default_domain=_default_domain(args)
        )
    emit(args, rollout_id, metrics, "eval/step")
    return False


def rollout_step(args: Any, rollout_id: int) -> int:
    """The x-axis value slime logs with (its ``compute_rollout_step``): the train step or the rollout id."""
    if getattr(args, "wandb_always_use_train_step", False):
        return rollout_id * args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size
    return rollout_id


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


def _pass_k_metrics(group: list[Any], where: str) -> dict[str, float]:
    """pass^k over the episodes the customer did not decide: one the review took out (``user_error``) is no
    evidence about the policy, so it is counted beside pass^k (``review/excluded_from_pass_k``), never as a 0."""
    scored = [s for s in group if not is_customer_error(s.metadata)]
    beside = {"review/excluded_from_pass_k": float(len(group) - len(scored))} if len(scored) < len(group) else {}
    if not scored:
        return beside
    wins, counts = per_task_outcomes(scored)
    n = min(counts)
    if n != max(counts):
        logger.warning(
            "tau metrics %s: tasks have %d to %d samples each; pass^k is reported for k=1..%d only",
            where,
            n,
            max(counts),
            n,
        )
    return {
        **pass_hat_ks(wins, counts),
        **pass_k_bounds(wins, counts),
        "tasks": float(len(counts)),
        "trials_per_task": float(n),
        **beside,
    }


def pass_k_bounds(successes: Sequence[int], trials: Sequence[int]) -> dict[str, float]:
    """``pass^k/ci95_low`` and ``pass^k/ci95_high``: the seeded 95% bootstrap interval over tasks (``noise.py``)."""
    out: dict[str, float] = {}
    for name, interval in pass_k_intervals(successes, trials).items():
        out |= {f"{name}/ci95_low": interval.low, f"{name}/ci95_high": interval.high}
    return out


def emit(args: Any, rollout_id: int, metrics: dict[str, float], step_key: str) -> None:
    """Log ``metrics`` at ``step_key`` through slime's logger (and ours); the one way our hooks log."""
    if not metrics:
        return
    metrics[step_key] = rollout_step(args, rollout_id)
    logger.info("tau metrics %s %s: %s", step_key.split("/")[0], rollout_id, metrics)
    log = _slime_log()
    if log is not None:
        log(args, metrics, step_key=step_key)


def _slime_log() -> Any:
    """slime's ``logging_utils.log`` (current or pre-2026-08 location), or None outside slime."""
    for module in ("slime.observability.logging_utils", "slime.utils.logging_utils"):
        try:
            return importlib.import_module(module).log
        except ImportError:
            continue
    return None


def _is_ours(sample: Any) -> bool:
    meta = getattr(sample, "metadata", None)
    reward = getattr(sample, "reward", None)
    return (
        isinstance(meta, dict)
        and "termination_reason" in meta
        and isinstance(reward, (int, float))
        and not isinstance(reward, bool)
    )


def _domain_of(meta: dict[str, Any], default: str) -> str:
    if meta.get("benchmark") and meta.get("domain"):
        return f"{meta['benchmark']}/{meta['domain']}"
    return default


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


def _flatten(samples: Any) -> list[Any]:
    """slime may hand over ``list[list[Sample]]`` (groups); metrics want the samples."""
    flat: list[Any] = []
    for item in samples:
        flat.extend(_flatten(item) if isinstance(item, list) else [item])
    return flat


def _default_domain(args: Any) -> str:
    return f"{getattr(args, 'tau_benchmark', None) or 'tau2'}/{getattr(args, 'tau_domain', None) or 'retail'}"
