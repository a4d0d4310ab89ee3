"""Batch rollouts outside slime, through the *same* path as training (``generate.play_sample``).

Each episode fills a :class:`RolloutSample` (slime's field names and status values, no slime needed)
through ``generate.play_sample`` with the run's :class:`TauConfig`; the results become ``samples.jsonl`` rows and a
summary with τ's pass^k. :func:`play` is the batch: a bounded number of episodes at once, each handed to
a callback as it finishes, and (when asked) Ctrl-C stops it cleanly: no new episode starts, running
ones are cancelled, and what finished is returned with ``interrupted=True``.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from slime_tau_plugin.adapters.slime.generate import play_sample
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.cost import COST_KEY
from slime_tau_plugin.engine.episode.result import SampleStatus
from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.engine.net.loop_http import aclose_all
from slime_tau_plugin.reporting.summary import (
    domain_summary,
    left_out,
    pass_k_summary,
    per_task_outcomes,
    per_task_table,
)
from slime_tau_plugin.tools.cli.flag_names import in_cli_terms
from slime_tau_plugin.tools.cli.views.review_view import review_summary_line


@dataclass
class RolloutSample:
    """The subset of slime's ``Sample`` that ``generate()`` fills (fields set directly)."""

    Status = SampleStatus
    """slime's status members, by the one trainer-neutral enum."""

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

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RolloutSample:
        """A ``samples.jsonl`` row back as a sample (unknown keys are ignored)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in row.items() if k in known}
        values["status"] = cls.Status(row.get("status", "pending"))
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Episode:
    """One (task, trial) to play."""

    position: int
    """The task's position in its split (the row's ``index``)."""
    ref: TaskRef
    trial: int
    """0-based trial number of this task."""

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        return (self.ref.benchmark, self.ref.domain, self.ref.split, self.ref.task_id, self.trial)


def episode_key(metadata: dict[str, Any]) -> tuple[str, str, str, str, int]:
    """The (benchmark, domain, split, task id, trial) a ``samples.jsonl`` row played."""
    task = task_id_of(metadata)
    trial = metadata.get("trial", 0)
    split = str(metadata.get("split"))
    return (str(metadata.get("benchmark")), str(metadata.get("domain")), split, str(task), int(trial))


def sampling_seed(seed: int, key: tuple[str, str, str, str, int]) -> int:
    """SGLang's ``sampling_seed`` for one (task, trial): a hash of the run seed and the key, < 2**48.

    The same task and trial get the same seed whatever else the run contains (``--tasks`` subsets and
    ``--resume`` repeat exactly); 48 bits keep it exact in any JSON reader and within SGLang's int64.
    """
    digest = hashlib.sha256("/".join(map(str, (seed, *key))).encode()).digest()
    return int.from_bytes(digest[:6], "big")


@dataclass(frozen=True, slots=True)
class BatchResult:
    samples: list[RolloutSample]
    """Finished samples in the order they finished."""
    interrupted: bool
    """Ctrl-C stopped the batch: episodes not in ``samples`` were cancelled or never started."""


async def play(
    config: TauConfig,
    episodes: Sequence[Episode],
    *,
    concurrency: int,
    sampling_params: dict[str, Any],
    seed: int | None = None,
    on_done: Callable[[RolloutSample], None] | None = None,
    stop_on_sigint: bool = False,
) -> BatchResult:
    """Play ``episodes``, at most ``concurrency`` at once; ``on_done`` sees each sample as it finishes.

    With ``seed`` each episode sends its own :func:`sampling_seed` (also in ``metadata["sampling_seed"]``).
    An exception from ``play_sample`` (a ConfigError: every sample would fail) or from ``on_done`` cancels the rest
    and is raised.
    """
    gate = asyncio.Semaphore(concurrency)
    run_id = f"{time.time_ns():x}"
    finished: list[RolloutSample] = []
    jobs: list[asyncio.Task[None]] = []

    async def one(ep: Episode) -> None:
        row = task_row(ep.position, ep.ref)
        sample = RolloutSample(prompt=row["index"], metadata={**row["metadata"], "trial": ep.trial})
        sample.session_id = f"{run_id}-{ep.position}-{ep.trial}"
        params = sampling_params
        if seed is not None:
            sample.metadata["sampling_seed"] = sampling_seed(seed, ep.key)
            params = {**sampling_params, "sampling_seed": sample.metadata["sampling_seed"]}
        async with gate:
            try:
                await play_sample(config, sample, params)  # it copies the dict itself
            except Exception:
                _cancel(jobs)
                raise
        finished.append(sample)
        if on_done is not None:
            try:
                on_done(sample)
            except Exception:  # the caller stops the run (the first episodes show a wrong parser)
                _cancel(jobs)
                raise

    interrupted = False
    loop = asyncio.get_running_loop()

    def interrupt() -> None:
        nonlocal interrupted
        if interrupted:  # a second Ctrl-C/SIGTERM stops at once; the CLI records the run as killed
            raise KeyboardInterrupt
        interrupted = True
        _cancel(jobs)

    jobs.extend(asyncio.create_task(one(ep)) for ep in episodes)
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    watching = stop_on_sigint and _watch_sigint(loop, interrupt)
    try:
        results = await asyncio.gather(*jobs, return_exceptions=True)
    finally:
        if watching:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
                if before[sig] is not None:  # asyncio would leave SIGTERM at its default (die silently)
                    signal.signal(sig, before[sig])
        await aclose_all()  # this loop ends with the CLI command
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result
    return BatchResult(finished, interrupted)


def summarize(samples: Sequence[RolloutSample], samples_per_task: int | None = None, wall_s: float = 0.0) -> dict:
    """Per-domain pass^1..k, mean reward, turns, errors, terminations, tokens and wall time.

    pass^k uses each task's own trial count (τ's C(c, k)/C(n, k) per task), for k up to the fewest trials
    any task has: an interrupted run reports what its data supports. ``samples_per_task`` (the trials
    asked for) is recorded, not assumed.
    """
    by_domain: dict[str, list[RolloutSample]] = defaultdict(list)
    for s in samples:
        by_domain[f"{s.metadata.get('benchmark')}/{s.metadata.get('domain')}"].append(s)
    domains = {name: _domain_summary(group) for name, group in sorted(by_domain.items())}
    errors = error_counts(samples)
    failed = sum(s.status is RolloutSample.Status.FAILED for s in samples)
    return {
        "domains": domains,
        "samples": len(samples),
        "samples_per_task": samples_per_task,
        "failed": failed,
        "scored": sum(d["scored"] for d in domains.values()),
        "errors": [{"error": error, "samples": n} for error, n in errors.most_common(5)],
        "wall_s": round(wall_s, 2),
    }


def _domain_summary(group: list[RolloutSample]) -> dict[str, Any]:
    """``summary.domain_summary`` (slime's metric names) plus what a person reads after a run.

    pass^k follows the one rule of ``reporting/summary.py``, as slime's eval log does: a FAILED sample
    (policy server gone, endpoint error) or one past ``--episode-timeout-s`` (``deadline``) is no evidence about the
    model, so it is left out (``left_out``, and ``failed`` next to pass^k) instead of counted as a wrong answer.
    Mean reward and mean turns are taken over the same samples as pass^k.
    """
    completed = [s for s in group if not left_out(s)]
    counts = per_task_outcomes(completed)[1]
    counted = domain_summary(completed) if completed else {}
    passes = pass_k_summary(group)
    return {
        **domain_summary(group),
        "reward_mean": counted.get("reward_mean", 0.0),  # like pass^k: over the samples that completed
        "pass_rate": counted.get("pass_rate", 0.0),
        "turns_mean": counted.get("turns_mean", 0.0),  # a FAILED episode's few turns say nothing of the model
        **{name: value for name, value in passes.items() if name.startswith("pass^")},
        "left_out": int(passes["left_out"]),
        "tasks": len(counts),
        "scored": len(completed),
        "failed": sum(s.status is RolloutSample.Status.FAILED for s in group),
        "per_task": per_task_table(completed),
        "trials_per_task": [min(counts), max(counts)] if counts else [0, 0],
        "terminations": dict(Counter(s.metadata.get("termination_reason", "?") for s in group)),
        "statuses": dict(Counter(s.status.value for s in group)),
        "errors": dict(error_counts(group).most_common(3)),
        "tau_package": sorted(
            {f"{m['tau_package']} {m.get('tau_version')}" for m in (s.metadata for s in group) if m.get("tau_package")}
        ),
        "user_guidelines": sorted(  # which user-simulator guidelines ran (tau_user_guidelines_file): cost report
            {str(g) for s in group if (g := (s.metadata.get(COST_KEY) or {}).get("guidelines"))}
        ),
    }


def format_summary(summary: dict[str, Any]) -> str:
    """The results table the CLI prints."""
    lines = []
    for name, d in summary["domains"].items():
        passes = "  ".join(_with_interval(d, k) for k in d if k.startswith("pass^") and "/" not in k)
        low, high = d.get("trials_per_task") or [d["samples"] // max(d["tasks"], 1)] * 2
        failed = f" ({d['failed']} more FAILED, not counted in pass^k)" if d.get("failed") else ""
        reward = f"{d['reward_mean']:.3f}" if d.get("scored", 1) else "n/a (no sample scored)"
        lines += [
            f"{name}: {d['tasks']} tasks x {low if low == high else f'{low}-{high}'} samples{failed}",
            f"  {passes or 'pass^k: no sample completed'}",
            f"  mean reward {reward} | mean turns {d['turns_mean']:.1f} | tool calls/episode "
            f"{d['tool_calls_per_episode']:.1f} (errors {d['tool_errors_per_episode']:.1f}) | parse errors/episode "
            f"{d['parse_errors_per_episode']:.1f}",
            f"  terminations {d['terminations']} | statuses {d['statuses']}",
            f"  tokens/sample: response {d['tokens/response_mean']:.0f}, trainable {d['tokens/trainable_mean']:.0f}",
            f"  τ package: {', '.join(d['tau_package']) or 'unknown'}",
        ]
        lines += [f"  error in {count} samples: {in_cli_terms(e)}" for e, count in (d.get("errors") or {}).items()]
        lines += [line for line in (review_summary_line(d), cost_summary_line(d)) if line]
        if d["nl_assertions_excluded_rate"]:
            excluded = round(d["nl_assertions_excluded_rate"] * d["samples"])
            lines.append(
                f"  NOTE: NL assertions were EXCLUDED from the reward of {excluded} samples "
                "(--nl-assertions exclude); these rewards are not τ's full reward"
            )
    lines.append(f"{summary['samples']} samples in {summary['wall_s']:.1f}s")
    return "\n".join(lines)


def cost_summary_line(d: dict[str, Any]) -> str:
    """What the customer cost per episode (``tau_user/cost_*``), when it made requests or was judged; else ""."""
    c = {k.removeprefix("tau_user/cost_"): v for k, v in d.items() if k.startswith("tau_user/cost_")}
    if not c.get("requests_per_episode") and not c.get("judge_requests_per_episode"):
        return ""
    line = (
        f"  customer/episode: {c['requests_per_episode']:.1f} requests ({c['failed_requests_per_episode']:.1f} "
        f"failed), tokens {c['prompt_tokens_per_episode']:.0f} in / {c['completion_tokens_per_episode']:.0f} out, "
        f"{c['wait_share']:.1%} of wall time waiting"
    )
    if d.get("user_guidelines"):
        line += f", guidelines {', '.join(d['user_guidelines'])}"
    if c.get("judge_requests_per_episode"):
        line += (
            f" | review judge: {c['judge_requests_per_episode']:.1f} requests, "
            f"{c['judge_tokens_per_episode']:.0f} tokens, {c['judge_wait_share']:.1%} of wall time"
        )
    return line


def _with_interval(d: dict[str, Any], key: str) -> str:
    """``pass^1=0.620 [0.540, 0.700]``: the value and its 95% interval over tasks, when the summary has one."""
    low, high = d.get(f"{key}/ci95_low"), d.get(f"{key}/ci95_high")
    return f"{key}={d[key]:.3f}" + ("" if low is None or high is None else f" [{low:.3f}, {high:.3f}]")


def error_counts(samples: Sequence[RolloutSample]) -> Counter[str]:
    """``metadata["error"]`` per sample, with request ids (``rid=…``) removed so equal causes count together."""
    return Counter(_RID.sub("", str(s.metadata["error"])) for s in samples if s.metadata.get("error"))


_RID = re.compile(r" ?\(rid=[^)]*\)| ?rid=\S+")


def _cancel(jobs: list[asyncio.Task[None]]) -> None:
    current = asyncio.current_task()
    for job in jobs:
        if job is not current and not job.done():
            job.cancel()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Ctrl-C and what schedulers send (SIGTERM) stop a batch the same way."""


def _watch_sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> bool:
    """Route Ctrl-C and SIGTERM to ``handler``; False where the loop cannot (not the main thread, Windows)."""
    try:
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True
