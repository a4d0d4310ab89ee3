"""Batch rollouts outside slime, through the *same* ``generate()`` path as training.

Each episode fills a :class:`RolloutSample` (slime's field names and status values, no slime needed)
through ``slime_tau_plugin.generate.generate``; the results become ``samples.jsonl`` rows and a
summary with τ's pass^k.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..data import task_row
from ..envs import TaskRef
from ..generate import generate
from ..loop_http import aclose_all
from ..metrics import pass_hat_k


@dataclass
class RolloutSample:
    """The subset of slime's ``Sample`` that ``generate()`` fills (fields set directly)."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    prompt: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    reward: float | None = None
    status: Status = Status.PENDING
    remove_sample: bool = False

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["status"] = self.status.value
        return row


async def run_rollouts(
    args: Any,
    refs: Sequence[TaskRef],
    samples_per_task: int,
    concurrency: int,
    sampling_params: dict[str, Any],
    on_done: Callable[[RolloutSample], None] | None = None,
) -> list[RolloutSample]:
    """Run ``samples_per_task`` episodes of every task, at most ``concurrency`` at once."""
    gate = asyncio.Semaphore(concurrency)
    run_id = f"{time.time_ns():x}"

    async def one(i: int, ref: TaskRef, k: int) -> RolloutSample:
        row = task_row(i, ref)
        sample = RolloutSample(prompt=row["index"], metadata={**row["metadata"], "trial": k})
        sample.session_id = f"{run_id}-{i}-{k}"
        async with gate:
            await generate(args, sample, sampling_params)  # generate() copies the dict itself
        if on_done is not None:
            on_done(sample)
        return sample

    jobs = [one(i, ref, k) for i, ref in enumerate(refs) for k in range(samples_per_task)]
    try:
        return list(await asyncio.gather(*jobs))
    finally:
        await aclose_all()  # this loop ends with the CLI command


def summarize(samples: Sequence[RolloutSample], samples_per_task: int, wall_s: float) -> dict[str, Any]:
    """Per-domain pass^1..k, mean reward, turns, errors, terminations, tokens and wall time."""
    by_domain: dict[str, list[RolloutSample]] = defaultdict(list)
    for s in samples:
        by_domain[f"{s.metadata.get('benchmark')}/{s.metadata.get('domain')}"].append(s)
    domains = {}
    for name, group in sorted(by_domain.items()):
        per_task: dict[str, int] = Counter()
        for s in group:
            key = str(s.metadata.get("task_id", s.metadata.get("task_index")))
            per_task[key] += int((s.reward or 0.0) >= 1.0 - 1e-6)
        n = len(group)
        domains[name] = {
            "tasks": len(per_task),
            "samples": n,
            **{
                f"pass^{k}": pass_hat_k(list(per_task.values()), samples_per_task, k)
                for k in range(1, samples_per_task + 1)
            },
            "mean_reward": sum(s.reward or 0.0 for s in group) / n,
            "mean_turns": sum(s.metadata.get("num_turns", 0) for s in group) / n,
            "tool_calls": sum(s.metadata.get("tool_calls", 0) for s in group),
            "tool_errors": sum(s.metadata.get("tool_errors", 0) for s in group),
            "parse_errors": sum(s.metadata.get("parse_errors", 0) for s in group),
            "terminations": dict(Counter(s.metadata.get("termination_reason", "?") for s in group)),
            "statuses": dict(Counter(s.status.value for s in group)),
            "mean_response_tokens": sum(s.response_length for s in group) / n,
            "mean_trainable_tokens": sum(sum(s.loss_mask or []) for s in group) / n,
            "nl_assertions_excluded": sum(1 for s in group if "nl_assertions" in (s.metadata.get("reward_info") or {})),
            "tau_package": sorted(
                {
                    f"{s.metadata['tau_package']} {s.metadata.get('tau_version')}"
                    for s in group
                    if s.metadata.get("tau_package")
                }
            ),
        }
    return {"domains": domains, "samples": len(samples), "wall_s": round(wall_s, 2)}


def format_summary(summary: dict[str, Any]) -> str:
    """The results table the CLI prints."""
    lines = []
    for name, d in summary["domains"].items():
        passes = "  ".join(f"{k}={v:.3f}" for k, v in d.items() if k.startswith("pass^"))
        lines += [
            f"{name}: {d['tasks']} tasks x {d['samples'] // max(d['tasks'], 1)} samples",
            f"  {passes}",
            f"  mean reward {d['mean_reward']:.3f} | mean turns {d['mean_turns']:.1f} | tool calls {d['tool_calls']} "
            f"(errors {d['tool_errors']}) | parse errors {d['parse_errors']}",
            f"  terminations {d['terminations']} | statuses {d['statuses']}",
            f"  tokens/sample: response {d['mean_response_tokens']:.0f}, trainable {d['mean_trainable_tokens']:.0f}",
            f"  τ package: {', '.join(d['tau_package']) or 'unknown'}",
        ]
        if d["nl_assertions_excluded"]:
            lines.append(
                f"  NOTE: NL assertions were EXCLUDED from the reward of {d['nl_assertions_excluded']} samples "
                "(--nl-assertions exclude); these rewards are not τ's full reward"
            )
    lines.append(f"{summary['samples']} samples in {summary['wall_s']:.1f}s")
    return "\n".join(lines)
