"""``show DIR --compare DIR2``: two runs' pass^k per domain side by side, with the change and whether it
is larger than the noise.

Reads only each run's ``summary.json`` (``domains`` → ``{"pass^1": …, "reward_mean": …, "tasks": …,
"per_task": {task: [successes, trials]}}``), so it works on runs of any size and needs no tokenizer. The
paired test (``noise.paired_test``: sign flips over the tasks both runs scored, with a bootstrap interval)
needs ``per_task``; a summary written before it had one is compared without it. A missing or damaged
summary is a one-line error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.reporting.noise import FLIPS, paired_test, per_task_pass_k
from slime_tau_plugin.tools.cli.run_dir.run_files import read_summary
from slime_tau_plugin.tools.cli.run_dir.run_state import state_notes

PASS_KEY = re.compile(r"^pass\^(\d+)$")


def _domains(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    summary = read_summary(run_dir)
    domains = summary.get("domains")
    if not isinstance(domains, dict) or not all(isinstance(d, dict) for d in domains.values()):
        raise ConfigError(f"{Path(run_dir) / 'summary.json'} has no per-domain results ('domains'); re-run the rollout")
    return domains


def _metrics(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """pass^1..pass^k present in either run (in k order), then mean reward."""
    ks = sorted({int(m.group(1)) for d in (a, b) for key in d if (m := PASS_KEY.match(key))})
    return [f"pass^{k}" for k in ks] + ["reward_mean"]


LEGACY_KEYS = {"reward_mean": "mean_reward"}
"""Runs written before the CLI summary took slime's metric names (2026-11-24) still compare."""


def _value(domain: dict[str, Any], metric: str) -> Any:
    value = domain.get(metric)
    return domain.get(LEGACY_KEYS[metric]) if value is None and metric in LEGACY_KEYS else value


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def compare_runs(dir_a: str | Path, dir_b: str | Path) -> str:
    """The comparison table (B − A per metric) plus notes where the runs are not like for like.

    Raises:
        ConfigError: either summary is missing, unreadable or has no ``domains``.
    """
    runs = _domains(dir_a), _domains(dir_b)
    header = ("domain", "metric", "A", "B", "B − A")
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for name in sorted(set(runs[0]) | set(runs[1])):
        a, b = runs[0].get(name, {}), runs[1].get(name, {})
        for metric in _metrics(a, b):
            va, vb = _number(_value(a, metric)), _number(_value(b, metric))
            delta = "—" if va is None or vb is None else f"{vb - va:+.3f}"
            rows.append((name, metric, _cell(va), _cell(vb), delta))
        if not a or not b:
            notes.append(f"note: {name} is only in run {'B' if not a else 'A'}")
        elif (a.get("tasks"), a.get("samples")) != (b.get("tasks"), b.get("samples")):
            notes.append(
                f"note: {name}: the runs differ in size (A {a.get('tasks')} tasks / {a.get('samples')} samples, "
                f"B {b.get('tasks')} tasks / {b.get('samples')} samples); compare with care"
            )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    table = [f"A: {dir_a}", f"B: {dir_b}", line(header), line(tuple("-" * w for w in widths))]
    table += [line(r) for r in rows]
    return "\n".join(table + notes + state_notes(dir_a, dir_b) + paired_lines(*runs))


def paired_lines(runs_a: dict[str, dict[str, Any]], runs_b: dict[str, dict[str, Any]]) -> list[str]:
    """One line per domain and k: B − A over the shared tasks, its 95% interval, p, and the verdict."""
    lines: list[str] = []
    for name in sorted(set(runs_a) & set(runs_b)):
        a, b = runs_a[name].get("per_task"), runs_b[name].get("per_task")
        if not isinstance(a, dict) or not isinstance(b, dict):
            lines.append(f"note: {name}: no per-task results in a summary (written before 2026-11-24): no paired test")
            continue
        shared = sorted(set(a) & set(b))
        if not shared:
            lines.append(f"note: {name}: the runs share no task: no paired test")
            continue
        trials = min(min(a[t][1], b[t][1]) for t in shared)
        for k in range(1, trials + 1):
            va = per_task_pass_k([a[t][0] for t in shared], [a[t][1] for t in shared], k)
            vb = per_task_pass_k([b[t][0] for t in shared], [b[t][1] for t in shared], k)
            test = paired_test(va, vb)
            verdict = "LARGER than the noise" if test.exceeds_noise else "within the noise"
            lines.append(
                f"paired {name} pass^{k}: B − A = {test.difference:+.3f} [{test.interval.low:+.3f}, "
                f"{test.interval.high:+.3f}] over {test.tasks} shared tasks, p = {test.p_value:.3f}: {verdict}"
            )
    if lines:
        lines.append(f"(paired: sign-flip permutation test, {FLIPS} flips; 95% bootstrap interval over tasks)")
    return lines
