"""What a run folder holds and whether it ended, in words, for ``show --compare``.

A comparison of a run that did not finish, or whose samples partly FAILED (a policy server that died),
reads like a change in the model unless it says so; these notes say so next to the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slime_tau_plugin.tools.cli.run_dir.run_files import read_summary

STATES = {
    "running": "unfinished: its summary still says running (the run is going on, or was killed with no chance to "
    "write its end)",
    "interrupted": "unfinished: interrupted (Ctrl-C or SIGTERM)",
    "stopped": "unfinished: stopped after its first episodes, mostly parse errors (a wrong --tool-call-parser)",
    "killed": "unfinished: interrupted (a second Ctrl-C or SIGTERM; written as killed before 2026-11-26)",
}
"""``summary.json`` ``state`` → what a comparison must say about it (``finished`` says nothing)."""


def state_notes(dir_a: str | Path, dir_b: str | Path) -> list[str]:
    """One note per run that is unfinished or holds FAILED samples."""
    notes: list[str] = []
    for label, run_dir in (("A", dir_a), ("B", dir_b)):
        summary = read_summary(run_dir)
        notes += _notes(label, summary)
    return notes


def _notes(label: str, summary: dict[str, Any]) -> list[str]:
    notes = []
    held = summary.get("samples") or 0
    planned = _planned(summary)
    of = f" of {planned} planned" if planned else ""
    state = summary.get("state")
    if state in STATES:
        notes.append(f"note: run {label} is {STATES[state]}; it holds {held}{of} samples")
    failed = summary.get("failed") or 0
    if failed:
        notes.append(
            f"note: run {label}: {failed} of {held} samples FAILED (endpoint errors, not answers); its pass^k "
            "counts only the completed ones; compare with care"
        )
    return notes


def _planned(summary: dict[str, Any]) -> int | None:
    run = summary.get("run")
    if not isinstance(run, dict):
        return None
    tasks, trials = run.get("tasks"), run.get("samples_per_task")
    return len(tasks) * trials if isinstance(tasks, list) and isinstance(trials, int) else None
