"""The numbers ``show`` prints above a sample of slime's rollout dumps: per domain, and per rollout.

A dump holds every sample slime's rollout function returned for one step (after its dynamic filter, before
training), so these are the training-time counterparts of a rollout run's summary: samples, τ's mean reward
and pass rate (from ``metadata["task_reward"]`` when the reward was shaped), the mean partial score,
statuses and why episodes ended. Samples without our metadata (another generate function) are grouped
under ``other``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any

from slime_tau_plugin.reporting.reward_breakdown import reward_breakdown_metrics
from slime_tau_plugin.reporting.summary import domain_summary as domain_summary_metrics
from slime_tau_plugin.tools.cli.run_dir.rollout_dump import DumpFile


def domain_summary(rows: tuple[dict[str, Any], ...]) -> list[str]:
    """One line per ``benchmark/domain``: samples, reward, pass, partial score, statuses, ends."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        meta = row.get("metadata") or {}
        name = f"{meta['benchmark']}/{meta['domain']}" if meta.get("benchmark") and meta.get("domain") else "other"
        groups[name].append(row)
    lines = []
    for name, group in sorted(groups.items()):
        stats = _stats(group)
        statuses = Counter(str(getattr(r.get("status"), "value", r.get("status"))) for r in group)
        ends = Counter(str((r.get("metadata") or {}).get("termination_reason")) for r in group)
        lines.append(
            f"{name}: {len(group)} samples | reward {stats['reward']} | pass {stats['pass']} | "
            f"partial {stats['partial']} | status {_counts(statuses)} | ended by {_counts(ends)}"
        )
    return lines


def rollout_table(dumps: list[DumpFile]) -> list[str]:
    """One row per dump file: rollout, samples, mean reward, pass rate, failed share, mean partial score."""
    header = f"{'rollout':<10} {'samples':>7} {'reward':>7} {'pass':>6} {'failed':>6} {'partial':>7}"
    lines = [header]
    for dump in dumps:
        stats = _stats(list(dump.rows), short=True)
        failed = sum(str(getattr(r.get("status"), "value", r.get("status"))) == "failed" for r in dump.rows)
        share = f"{failed / len(dump.rows):.3f}" if dump.rows else "-"
        lines.append(
            f"{dump.path.stem:<10} {len(dump.rows):>7} {stats['reward']:>7} {stats['pass']:>6} {share:>6} "
            f"{stats['partial']:>7}"
        )
    return lines


def _stats(group: list[dict[str, Any]], short: bool = False) -> dict[str, str]:
    """Reward, pass and partial score from the same functions slime's metrics use (τ's unshaped reward)."""
    samples = [_as_sample(row) for row in group]
    if not samples:
        return {"reward": "-", "pass": "-", "partial": "-"}
    stats = domain_summary_metrics(samples)
    partial = [
        v for k, v in reward_breakdown_metrics(samples, default_domain="_").items() if k.endswith("/partial_score_mean")
    ]
    passed = round(stats["pass_rate"] * len(samples))
    return {
        "reward": f"{stats['reward_mean']:.3f}",
        "pass": f"{stats['pass_rate']:.3f}" if short else f"{passed}/{len(samples)}",
        "partial": f"{sum(partial) / len(partial):.3f}" if partial else "-",
    }


def _as_sample(row: dict[str, Any]) -> SimpleNamespace:
    """A dumped ``Sample.to_dict()`` with the attributes ``metrics`` reads."""
    return SimpleNamespace(
        reward=row.get("reward"),
        status=row.get("status"),
        metadata=row.get("metadata") or {},
        response_length=row.get("response_length") or 0,
        loss_mask=row.get("loss_mask"),
    )


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counter.most_common())
