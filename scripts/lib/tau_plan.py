"""The numbers a launch dry run states before anything starts: the context budget and the eval cadence's cost
(in time: an eval lasts as long as its slowest episode, bounded by the episode deadline).

``budget --config YAML --train-sets SPECS --eval-sets SPECS --context N --per-turn N ...``
    prints ``log=`` lines (what the run will do, with numbers) and ``warn=`` lines (where typical episodes will
    be cut). The launch script (``scripts/lib/tau_launch.sh``) shows both; a warning does not stop a run.

Episode sizes come from :data:`GOLD_PATHS`, measured by playing every task's reference solution with the built-in
oracle and Qwen3's chat template (``benchmarks/episode_lengths.md``): the shortest episode that solves the task.
A learning model writes more per turn and takes more turns, so these are a floor. Task counts come from the
installed τ (cached by ``tau_cache``: importing τ² costs seconds).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class GoldPath:
    """One domain's episodes on the reference solution, in Qwen3-template tokens (benchmarks/episode_lengths.md)."""

    prompt: int
    """System prompt (τ's policy) + tool schemas + the first user message: the largest over the domain's tasks."""
    after_p50: int
    """Tokens after the prompt (model turns, tool results, user turns, template glue): median episode."""
    after_p90: int
    after_max: int
    turns_p90: int
    other_per_turn: int
    """Tool and user text (with template glue) per model turn, mean: what a turn costs besides the model's own."""


GOLD_PATHS: dict[tuple[str, str], GoldPath] = {
    ("tau2", "retail"): GoldPath(5009, 1727, 5075, 6952, 12, 350),
    ("tau2", "airline"): GoldPath(5103, 777, 3102, 4227, 9, 247),
    ("tau2", "telecom"): GoldPath(7554, 435, 727, 1125, 10, 47),
    ("tau1", "retail"): GoldPath(4773, 653, 1507, 3099, 4, 272),
    ("tau1", "airline"): GoldPath(4153, 876, 2399, 7048, 8, 242),
}
"""Per training domain: τ² 26.3 train splits, τ-bench v1 retail train, v1 airline test (its only split)."""


def task_counts(specs: list[str]) -> dict[str, Any]:
    """``{"tau2/retail/test": 40, ...}`` from the installed τ; a benchmark that is not installed maps to None."""
    from slime_tau_plugin.engine.data import parse_task_sets
    from slime_tau_plugin.engine.envs import get_backend
    from slime_tau_plugin.engine.errors import ConfigError

    counts: dict[str, Any] = {}
    for spec in specs:
        for task_set in parse_task_sets(spec):
            try:
                counts[str(task_set)] = len(get_backend(task_set.benchmark).task_refs(task_set.domain, task_set.split))
            except (ConfigError, ImportError):
                counts[str(task_set)] = None
    return counts


def context_lines(
    ns: argparse.Namespace, max_turns: int, domains: list[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """The context budget against ``--rollout-max-context-len``, per training domain."""
    log, warn = [], []
    known = [(d, GOLD_PATHS[d]) for d in domains if d in GOLD_PATHS]
    if not known:
        return [f"context: ROLLOUT_MAX_CONTEXT_LEN={ns.context}; no measured episode sizes for {domains}"], []
    for (benchmark, domain), gold in known:
        left = ns.context - gold.prompt
        cap_turns = max(left, 0) // (ns.per_turn + gold.other_per_turn)
        log.append(
            f"context {benchmark}/{domain}: prompt ~{gold.prompt:,} tokens leaves {left:,} of "
            f"ROLLOUT_MAX_CONTEXT_LEN={ns.context:,}; the reference solution needs {gold.after_p50:,} / "
            f"{gold.after_p90:,} / {gold.after_max:,} more (median / p90 / max, up to {gold.turns_p90} turns at p90); "
            f"turns at the full per-turn cap ({ns.per_turn:,} + ~{gold.other_per_turn} tool/user tokens) that fit: "
            f"{cap_turns} of tau_max_turns={max_turns}"
        )
        if gold.prompt + gold.after_p90 > ns.context:
            warn.append(
                f"{benchmark}/{domain}: ROLLOUT_MAX_CONTEXT_LEN={ns.context:,} cuts typical episodes: prompt "
                f"{gold.prompt:,} + p90 reference solution {gold.after_p90:,} = {gold.prompt + gold.after_p90:,} "
                "tokens (they end TRUNCATED as budget_exhausted); raise it (and CP_SIZE x MAX_TOKENS_PER_GPU with it)"
            )
        elif gold.prompt + gold.after_max > ns.context:
            log.append(
                f"context {benchmark}/{domain}: the longest reference solution "
                f"({gold.prompt + gold.after_max:,} tokens with the prompt) does not fit "
                f"ROLLOUT_MAX_CONTEXT_LEN={ns.context:,}: that task always ends TRUNCATED"
            )
    return log, warn


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def eval_line(ns: argparse.Namespace, counts: dict[str, Any], max_turns: int, deadline_s: float | None) -> str:
    """What one evaluation plays, how often, and what it costs in time: slime's train.py blocks on it (ray.get), and
    slime starts all of an eval's episodes at once, so each eval lasts as long as its slowest episode, as a rollout's
    generation lasts as long as its slowest; the episode deadline bounds it. A share of episodes would understate a
    small eval and overstate a large one: the wall time is set by the longest conversation, not by the count."""
    evals = 1 + ns.num_rollout // ns.eval_interval if ns.eval_interval > 0 else 0
    per_rollout = ns.rollout_batch * ns.samples_per_prompt
    if any(n is None for n in counts.values()):
        tasks = "task counts unknown here (benchmark not installed)"
        total = None
    else:
        total = sum(counts.values()) * ns.eval_samples
        tasks = (
            " + ".join(f"{n} {name}" for name, n in counts.items()) + f" tasks x {ns.eval_samples} = {total:,} episodes"
        )
    line = (
        f"eval cost: {tasks}, {evals} times in {ns.num_rollout} rollouts (before step 0 and every {ns.eval_interval}); "
        f"slime's train.py waits for each eval (ray.get), so training stops while it runs"
    )
    if evals == 0:
        return line
    played = f"its {total:,} episodes" if total is not None else "its episodes"
    line += (
        f"; time: slime plays {played} at once and the eval lasts as long as the slowest (up to "
        f"tau_max_turns={max_turns} turns), like a rollout's generation (the slowest of its {per_rollout}+ episodes): "
        f"~1 rollout's generation time each, {evals} evals ~{100 * evals / max(ns.num_rollout, 1):.0f}% on top of "
        f"the {ns.num_rollout} rollouts' generation time"
    )
    if deadline_s:
        line += (
            f"; tau_episode_timeout_s={deadline_s:g} bounds each eval at {_hours(deadline_s)}: at most "
            f"{_hours(evals * deadline_s)} of training blocked in {evals} evals"
        )
    else:
        line += "; no tau_episode_timeout_s: nothing bounds an eval's time but its slowest episode"
    return line + " (raise EVAL_INTERVAL to spend less)"


def budget(ns: argparse.Namespace) -> int:
    import yaml
    from tau_cache import cached

    from slime_tau_plugin.engine.data import parse_task_sets
    from slime_tau_plugin.engine.errors import ConfigError

    config = yaml.safe_load(Path(ns.config).read_text(encoding="utf-8")) or {}
    max_turns = int(config.get("tau_max_turns") or 30)
    try:
        train = [s for spec in ns.train_sets.split() for s in parse_task_sets(spec)]
        eval_specs = ns.eval_sets.split()
        counts = cached("task-counts", {"sets": eval_specs}, lambda: task_counts(eval_specs))
    except ConfigError as exc:
        print(f"error: TRAIN_SETS/EVAL_SETS: {exc}", file=sys.stderr)
        return 2
    domains = list(dict.fromkeys((s.benchmark, s.domain) for s in train))
    log, warn = context_lines(ns, max_turns, domains)
    deadline = config.get("tau_episode_timeout_s")
    log.append(eval_line(ns, counts, max_turns, float(deadline) if deadline else None))
    thinking, parser = config.get("tau_enable_thinking"), config.get("tau_reasoning_parser")
    log.append(
        f"thinking: tau_enable_thinking={'null (the template default)' if thinking is None else thinking}, "
        f"tau_reasoning_parser={parser or 'none'}"
    )
    for line in log:
        print(f"log={line}")
    for line in warn:
        print(f"warn={line}")
    return 0


MODEL_FLAGS = {"--rotary-base": "rope_theta", "--num-layers": "num_hidden_layers", "--hidden-size": "hidden_size"}
"""slime model-script flags and the HF ``config.json`` key each must equal: a preset's model script fits one
checkpoint (Qwen3-4B-Instruct-2507 has rope_theta 5,000,000, the original Qwen3-4B 1,000,000)."""


def model_check(ns: argparse.Namespace) -> int:
    """Refuses a MODEL_SCRIPT whose architecture flags disagree with the checkpoint's ``config.json``."""
    import json

    try:
        hf = json.loads(Path(ns.hf_config).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"error: {ns.hf_config}: cannot read it ({exc})", file=sys.stderr)
        return 2
    hf = {**(hf.get("rope_parameters") or {}), **(hf.get("rope_scaling") or {}), **hf}
    flags = dict(zip(ns.model_args, [*ns.model_args[1:], ""], strict=True))
    wrong = []
    for flag, key in MODEL_FLAGS.items():
        if flag in flags and key in hf and float(flags[flag]) != float(hf[key]):
            wrong.append(f"{flag} {flags[flag]} vs {key} {hf[key]}")
    if wrong:
        print(
            f"error: MODEL_SCRIPT={ns.model_script} does not fit HF_CKPT ({'; '.join(wrong)} in {ns.hf_config}); "
            "set MODEL_SCRIPT to slime's scripts/models file for this checkpoint (or HF_CKPT to the model it names)",
            file=sys.stderr,
        )
        return 1
    return 0


def train_sets(ns: argparse.Namespace) -> int:
    """Refuses a TRAIN_DATA whose rows come from other task sets than TRAIN_SETS names (the launch script reuses
    an existing file as is: without this, changing TRAIN_SETS silently trains on the old sets)."""
    import json

    from slime_tau_plugin.engine.data import parse_task_sets
    from slime_tau_plugin.engine.errors import ConfigError

    try:
        wanted = {str(s) for spec in ns.train_sets.split() for s in parse_task_sets(spec)}
    except ConfigError as exc:
        print(f"error: TRAIN_SETS: {exc}", file=sys.stderr)
        return 2
    built: set[str] = set()
    try:
        with Path(ns.train_data).open(encoding="utf-8") as fh:
            for line in fh:
                meta = (json.loads(line).get("metadata") or {}) if line.strip() else {}
                if {"benchmark", "domain", "split"} <= meta.keys():
                    built.add(f"{meta['benchmark']}/{meta['domain']}/{meta['split']}")
    except (OSError, ValueError) as exc:
        print(f"error: TRAIN_DATA={ns.train_data}: cannot read its rows ({exc})", file=sys.stderr)
        return 2
    if not built or built == wanted:
        return 0  # an empty file, or rows without task sets (not ours): nothing to compare
    print(
        f"error: TRAIN_DATA={ns.train_data} was built from {', '.join(sorted(built))}, but TRAIN_SETS={ns.train_sets} "
        f"names {', '.join(sorted(wanted))}; delete the file (and its eval rows) so the run prepares it from "
        "TRAIN_SETS, point TRAIN_DATA at another file, or set TRAIN_SETS to the sets it holds",
        file=sys.stderr,
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("budget", help="the context budget and the eval cadence's cost")
    p.add_argument("--config", required=True)
    p.add_argument("--train-sets", required=True)
    p.add_argument("--eval-sets", required=True)
    for flag in (
        "--context",
        "--per-turn",
        "--eval-samples",
        "--eval-interval",
        "--num-rollout",
        "--rollout-batch",
        "--samples-per-prompt",
    ):
        p.add_argument(flag, type=int, required=True)
    m = sub.add_parser("model-check", help="MODEL_ARGS against the checkpoint's config.json")
    m.add_argument("--hf-config", required=True)
    m.add_argument("--model-script", required=True)
    m.add_argument("model_args", nargs=argparse.REMAINDER)
    t = sub.add_parser("train-sets", help="TRAIN_DATA's rows against TRAIN_SETS")
    t.add_argument("--train-data", required=True)
    t.add_argument("--train-sets", required=True)
    ns = parser.parse_args(argv)
    if ns.command == "train-sets":
        return train_sets(ns)
    if ns.command == "model-check":
        ns.model_args = [a for a in ns.model_args if a != "--"]
        return model_check(ns)
    return budget(ns)


if __name__ == "__main__":
    sys.exit(main())
