"""What ``summary.json`` records about how a rollout was made, so a number can be traced and repeated.

``run_record`` is the ``"run"`` section: command line, versions (plugin, τ package, SGLang, transformers,
Python), tokenizer (absolute path), policy, sampling parameters, budgets, τ's ending rules (``limits``), user
simulator, reward mode, task list (ids), trials and seed. ``--resume`` compares the settings that change results
(:data:`RESULT_SETTINGS`) with the run it continues and refuses a mix. No secret is recorded: API keys
appear only as the name of their environment variable.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin import __version__
from slime_tau_plugin.engine.choices import UserKind
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.limits import EpisodeLimits
from slime_tau_plugin.engine.errors import ConfigError

TASK_SET_SETTINGS = ("benchmark", "domain", "split", "tasks", "samples_per_task")
"""What defines the (task, trial) pairs a run holds: a resume with another value would mix task sets."""
TOKEN_SETTINGS = ("policy.api", "policy.tool_call_parser", "policy.reasoning_parser", "policy.tools_in_prompt")
"""Settings that change a sample's tokens (the prompt's tool schemas, how replies are split and parsed): a run
holding two prompt formats has no one number."""
RESULT_SETTINGS = (
    *TASK_SET_SETTINGS,
    "tokenizer",
    "policy.server",
    *TOKEN_SETTINGS,
    "sampling",
    "budgets",
    "limits",
    "user",
    "reward",
    "seed",
)
"""Settings a resumed run must share with the run it continues (dotted paths into the record)."""


def run_record(
    ns: argparse.Namespace,
    *,
    tokenizer_dir: str,
    policy_url: str | None,
    sampling: dict[str, Any],
    refs: Sequence[TaskRef],
    tau_version: dict[str, str],
    limits: EpisodeLimits | None = None,
) -> dict[str, Any]:
    """The ``"run"`` section of summary.json for a ``rollout`` namespace; ``limits`` are the τ ending rules
    the run applies (``TauConfig.limits``: the flags, else the benchmark's), recorded as values (None = off)."""
    built_in = ns.sglang_url is None
    return {
        "argv": list(getattr(ns, "argv", []) or []),
        "versions": {
            "slime_tau_plugin": __version__,
            "tau": " ".join(v for v in (tau_version.get("tau_package"), tau_version.get("tau_version")) if v) or None,
            "sglang": _version("sglang"),
            "transformers": _version("transformers"),
            "python": platform.python_version(),
        },
        "benchmark": ns.benchmark,
        "domain": ns.domain,
        "split": ns.split,
        "retrieval_variant": getattr(ns, "retrieval_variant", None),
        "tasks": [ref.task_id for ref in refs],
        "samples_per_task": ns.samples_per_task,
        "seed": ns.seed,
        "tokenizer": tokenizer_dir,
        "policy": {
            "server": f"built-in {ns.policy or 'oracle'}" if built_in else "external",
            "url": policy_url,
            "api": ns.policy_api,
            "model": ns.policy_model,
            "tool_call_parser": ns.tool_call_parser,
            "reasoning_parser": ns.reasoning_parser,
            "tools_in_prompt": _plain(ns.tools_in_prompt),
        },
        "sampling": sampling,
        "budgets": {
            "max_new_tokens": ns.max_new_tokens,
            "max_context_len": ns.max_context_len,
            "max_turns": ns.max_turns,
        },
        "limits": None
        if limits is None
        else {
            "max_errors": limits.max_errors,
            "max_steps": limits.max_steps,
            "agent_error_rule": limits.agent_error_rule.value,
        },
        "user": {
            "simulator": ns.user,
            "base_url": ns.user_base_url if ns.user_base_url else ("built-in" if ns.user == UserKind.LLM else None),
            "model": ns.user_model,
            "api_key_env": ns.user_api_key_env,
            "temperature": getattr(ns, "user_temperature", None),
            "seed": "each episode's sampling_seed (--seed)" if ns.user == UserKind.LLM else None,
            "token_budget": [
                getattr(ns, "user_token_budget_per_step", None),
                getattr(ns, "user_token_budget_total", None),
            ],
        },
        "reward": {
            "mode": ns.reward_mode,
            "nl_assertions": ns.nl_assertions,
            "judge_base_url": ns.judge_base_url,
            "judge_model": ns.judge_model,
        },
        "concurrency": ns.concurrency,
    }


def check_resumable(previous: dict[str, Any] | None, current: dict[str, Any], where: str) -> None:
    """Refuse to resume a run made with other result-changing settings.

    Raises:
        ConfigError: the first setting that differs, with both values.
    """
    before = (previous or {}).get("run")
    if not isinstance(before, dict):
        return  # an older or killed run without a record: nothing to compare with
    for path in RESULT_SETTINGS:
        old, new = _get(before, path), _get(current, path)
        if old is _ABSENT:
            if path in TOKEN_SETTINGS:
                continue  # recorded only since issue 34: a run made before says nothing about it
            old = None
        if old != new:
            shown = "task ids" if path == "tasks" else path  # --tasks takes positions; the record keeps their ids
            raise ConfigError(
                f"--resume: {where} was made with {shown}={_short(old)}, this command gives {_short(new)}; "
                "use the same settings, or another --out for a new run"
            )


_ABSENT = object()


def _get(record: dict[str, Any], path: str) -> Any:
    """The value at a dotted path; :data:`_ABSENT` where the last key is missing, None where a parent is."""
    value: Any = record
    for part in path.split("."):
        value = value.get(part, _ABSENT) if isinstance(value, dict) else None
    return value


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
