"""The runs ``slime-tau export`` accepts: finished τ² runs the leaderboard would take, each refused in one line.

τ²'s leaderboard (``docs/leaderboard-submission.md`` and ``tau2.scripts.leaderboard`` in tau2-bench) takes one
trajectory file per domain, of ``retail``, ``airline``, ``telecom`` or ``banking_knowledge``; each holds every task
of the domain's ``base`` split, each played the same number of times (4+ preferred), by one agent model and one
LLM user simulator with the same arguments in every domain. Here those rules are checked on what a rollout
folder records (``summary.json``'s ``run`` section, ``samples.jsonl``'s rows) before τ is imported, so a run the
leaderboard would refuse costs a second, not a written file. Every refusal is a ``ConfigError`` (exit 2).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.run_dir.run_files import broken_samples, read_samples, read_summary

LEADERBOARD_DOMAINS = ("retail", "airline", "telecom", "banking_knowledge")
"""The text domains τ²'s leaderboard ranks (``tau2.scripts.leaderboard.submission.DOMAINS``)."""
LEADERBOARD_USER_SIMULATOR = "gpt-5.2"
"""The user simulator τ²'s submission guide recommends (a standard submission uses the default)."""
MIN_TRIALS = 4
"""The guide: "we strongly prefer results with at least 4 trials per domain"."""
SPLIT = "base"


@dataclass(frozen=True, slots=True)
class ExportRun:
    """One domain's finished run, checked: its record and its rows in ``samples.jsonl`` order."""

    run_dir: Path
    domain: str
    record: dict[str, Any]
    """``summary.json``'s ``run`` section."""
    rows: tuple[dict[str, Any], ...]
    trials: int

    @property
    def agent_model(self) -> str | None:
        return (self.record.get("policy") or {}).get("model")

    @property
    def user(self) -> dict[str, Any]:
        return self.record.get("user") or {}

    @property
    def tau_package(self) -> str | None:
        return (self.record.get("versions") or {}).get("tau")


def read_run(run_dir: str | Path, *, min_trials: int = MIN_TRIALS) -> ExportRun:
    """``run_dir`` checked against the leaderboard's rules for one domain.

    Raises:
        ConfigError: the first rule the run breaks, naming the run and what would fix it.
    """
    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    where = str(run_dir)
    state = summary.get("state")
    if state != "finished":
        raise ConfigError(
            f"{where} is not a finished run (summary.json state {state!r}); finish it with the same "
            "'slime-tau rollout' command plus --resume, then export"
        )
    record = summary.get("run")
    if not isinstance(record, dict):
        raise ConfigError(f"{where}/summary.json records no 'run' section (an older rollout); run it again")
    if record.get("benchmark") != "tau2":
        raise ConfigError(f"{where} is a {record.get('benchmark')} run; the τ² leaderboard takes τ² runs only")
    domain = record.get("domain")
    if domain not in LEADERBOARD_DOMAINS:
        raise ConfigError(f"{where} plays {domain!r}; the leaderboard ranks {', '.join(LEADERBOARD_DOMAINS)}")
    if record.get("split") != SPLIT:
        raise ConfigError(
            f"{where} plays the {record.get('split')!r} split; the leaderboard scores every task of the "
            f"{SPLIT!r} split: rollout --domain {domain} --split {SPLIT} (without --tasks/--task-ids)"
        )
    user = record.get("user") or {}
    if user.get("simulator") != "llm" or not user.get("model"):
        raise ConfigError(
            f"{where} was played by the {user.get('simulator')!r} user, not an LLM user simulator; the "
            f"leaderboard reports the user simulator's model (its guide recommends {LEADERBOARD_USER_SIMULATOR}): "
            f"rollout --user llm --user-model {LEADERBOARD_USER_SIMULATOR} --user-base-url URL"
        )
    samples = read_samples(run_dir)
    if broken_samples(samples):
        raise ConfigError(f"{samples.path} has cut-off lines; finish the run with --resume, then export")
    rows = tuple(samples.row(i) or {} for i in range(len(samples)))
    trials = _check_rows(where, domain, rows, record, min_trials)
    return ExportRun(run_dir, domain, record, rows, trials)


def _check_rows(where: str, domain: str, rows: tuple[dict[str, Any], ...], record: dict, min_trials: int) -> int:
    failed = [r for r in rows if r.get("status") in ("failed", "aborted")]
    if failed:
        raise ConfigError(
            f"{where}: {len(failed)} of {len(rows)} samples FAILED or were aborted (not τ results); play them "
            "again with the same command plus --resume --retry-failed, then export"
        )
    if any("tau_messages" not in (r.get("metadata") or {}) for r in rows):
        raise ConfigError(
            f"{where} records no τ message log (metadata 'tau_messages': a rollout made before export existed); "
            "run it again"
        )
    counts = Counter(str((r.get("metadata") or {}).get("task_id")) for r in rows)
    planned = [str(t) for t in record.get("tasks") or []]
    missing = [t for t in planned if t not in counts]
    if missing:
        raise ConfigError(
            f"{where}: {len(missing)} of {len(planned)} tasks have no sample (first: {missing[0]}); "
            "finish the run with --resume"
        )
    spread = sorted(set(counts.values()))
    if len(spread) != 1:
        raise ConfigError(
            f"{where}: tasks were played {'/'.join(map(str, spread))} times; the leaderboard needs every task "
            "played the same number of trials (one --samples-per-task, a finished run)"
        )
    trials = spread[0]
    if trials < min_trials:
        raise ConfigError(
            f"{where}: {trials} trial(s) per task; the leaderboard asks at least {MIN_TRIALS} "
            f"(rollout --samples-per-task {MIN_TRIALS}), or pass --min-trials {trials} to export it anyway"
        )
    return trials


def check_together(runs: list[ExportRun]) -> None:
    """One run per domain, one agent model and one user simulator (same arguments) in all of them.

    Raises:
        ConfigError: a domain given twice, or two runs whose agent or user simulator differ.
    """
    seen: dict[str, Path] = {}
    for run in runs:
        if run.domain in seen:
            raise ConfigError(
                f"{run.run_dir} and {seen[run.domain]} both play {run.domain}; the leaderboard takes one per domain"
            )
        seen[run.domain] = run.run_dir
    first = runs[0]
    for run in runs[1:]:
        for what, mine, theirs in (
            ("agent model (--policy-model)", run.agent_model, first.agent_model),
            ("user simulator", _user_key(run), _user_key(first)),
            ("τ package", run.tau_package, first.tau_package),
        ):
            if mine != theirs:
                raise ConfigError(
                    f"{run.run_dir} and {first.run_dir} differ in their {what} ({mine} vs {theirs}); the "
                    "leaderboard takes one configuration across domains"
                )


def _user_key(run: ExportRun) -> str:
    user = run.user
    return json.dumps({k: user.get(k) for k in ("model", "temperature")}, sort_keys=True)
