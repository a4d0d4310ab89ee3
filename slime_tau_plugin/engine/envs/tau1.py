"""τ-bench v1 backend (module ``tau_bench``, sierra-research/tau-bench; not on PyPI): retail and airline.

Why not drive v1's ``Env`` per episode: it re-reads its JSON database on construction, reset and reward,
replays the gold actions on every reward and hashes the whole database twice (~0.3 s retail, ~0.8 s
airline per episode, all under the GIL). Here v1's own tool classes run against an episode-private
copy-on-access view of a database loaded once per process (``tau1_data.Tau1Domain``), and the reward
(``tau1_reward.fast_reward``) compares against a gold outcome computed once per task, exactly as v1's
hash would. ``reference_reward`` runs v1's own ``calculate_reward`` on a real v1 ``Env``.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.choices import RewardMode
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
from slime_tau_plugin.engine.envs.copy_on_access import touched_hash
from slime_tau_plugin.engine.envs.names import TAU1_SPLITS
from slime_tau_plugin.engine.envs.tau1_data import (
    RESPOND,
    Tau1Domain,
    clone,
    distribution_version,
    import_tau1,
    scripted_v1_user,
    task_script,
)
from slime_tau_plugin.engine.envs.tau1_reward import fast_reward, reference_reward
from slime_tau_plugin.engine.errors import ConfigError

if TYPE_CHECKING:
    from slime_tau_plugin.engine.episode.result import TerminationReason

V1_RULES = "Rules:"
"""Where v1's user prompt (``LLMUserSimulationEnv.build_system_prompt``) starts its rules."""
SPLITS = TAU1_SPLITS
"""v1 has no split listing API: these are the ``task_split`` values its env classes accept (``names.py``)."""


class Tau1Session(EnvSession):
    """One v1 episode: a copy-on-access database, v1's tools, and the action log v1's reward reads."""

    def __init__(self, backend: Tau1Backend, ref: TaskRef, task: Any, gold: dict[str, dict], mode: RewardMode) -> None:
        self._backend, self._ref, self.task, self._gold, self.reward_mode = backend, ref, task, gold, mode
        self._domain = backend.domain(ref.domain)
        self.tools = self._domain.tools
        self.agent_system_prompt = self._domain.wiki
        self.script = task_script(task, ref.task_id)
        self.data: dict[str, Any] = self._domain.episode_data()
        self.actions: list[tuple[str, dict[str, Any]]] = []
        """Everything v1 would have in ``env.actions``: tool calls and ``respond`` messages, in order."""

    def step(self, call: EnvToolCall) -> StepResult:
        # Copy the arguments: v1 tools store argument objects in the database (book_reservation's
        # passengers and payment_methods) and later tools mutate them in place.
        kwargs = clone(dict(call.arguments))
        self.actions.append((call.name, kwargs))
        observation, raised = self._domain.run_tool(self.data, call.name, kwargs)
        is_done = call.name in self._domain.terminate_tools
        if not isinstance(observation, str):
            # v1 would fail validating its EnvResponse here (send_certificate returns None once a user
            # holds 3 certificates); keep the episode alive and report it as an error.
            return StepResult(str(observation), is_error=True, is_done=is_done)
        return StepResult(observation, is_error=raised or observation.startswith("Error"), is_done=is_done)

    def record_message(self, role: str, content: str) -> None:
        # v1 checks outputs only in the agent's ``respond`` actions; user turns are not actions.
        if role == "assistant":
            self.actions.append((RESPOND, {"content": content}))

    def state_hash(self) -> str:
        return touched_hash(self.data)

    def required_writes(self) -> tuple[str, ...]:
        return self._backend.gold_writes(self._ref.domain, self._ref.split, self.task)

    def fast_reward(self, termination: TerminationReason) -> RewardResult:
        return fast_reward(self._domain, self.task, self.data, self._gold, self.actions, termination)

    def reference_reward(self, termination: TerminationReason) -> RewardResult:
        return reference_reward(self._domain, self._v1_env, self.task, self.data, self.actions, termination)

    def _v1_env(self) -> Any:
        """A real v1 ``Env`` for this episode's domain and split (at the task's index when it has one)."""
        ref = self._ref
        index = _task_index(ref, len(self._backend.tasks(ref.domain, ref.split)))
        return self._backend.v1_env(ref.domain, ref.split, index)

    def user_system_prompt(self, guidelines: str | None = None) -> str:
        user_cls = self._domain.mods["envs.user"].LLMUserSimulationEnv
        # Its constructor calls the LLM; build_system_prompt needs no state.
        prompt = user_cls.__new__(user_cls).build_system_prompt(instruction=self.task.instruction)
        if guidelines is None:
            return prompt
        # v1's prompt is its opening and the instruction, then "Rules:" and the rules: the override replaces those
        head, _, _ = prompt.partition(V1_RULES)
        return f"{head.rstrip()}\n\n{V1_RULES}\n{guidelines}"


def _task_index(ref: TaskRef, n_tasks: int) -> int:
    """The ref's index into v1's task list, or 0 (a prepared row's task may no longer be in the list)."""
    try:
        index = int(ref.task_id)
    except (TypeError, ValueError):
        return 0
    return index if 0 <= index < n_tasks else 0


class Tau1Backend(EnvBackend):
    """Loads each domain's database once and each task's gold outcome once; episodes are cheap views."""

    name = "tau1"

    def __init__(self) -> None:
        self.mods = import_tau1()
        self._lock = threading.RLock()
        self._domains: dict[str, Tau1Domain] = {}
        self._tasks: dict[tuple[str, str], list[Any]] = {}
        self._gold: dict[tuple[str, str, str], dict[str, dict]] = {}
        self._writes: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._version = distribution_version()

    # --- tasks ---------------------------------------------------------------------------------

    def splits(self, domain: str) -> tuple[str, ...]:
        check_domain("tau1", domain)
        return SPLITS[domain]

    def v1_env(self, domain: str, split: str, task_index: int = 0) -> Any:
        """A real v1 ``Env`` (v1 builds its tasks, tools and data itself) with :func:`scripted_v1_user`."""
        self._check_split(domain, split)
        env = self.mods["envs"].get_env(
            domain, user_strategy="human", user_model="none", task_split=split, task_index=task_index
        )
        env.user = scripted_v1_user()  # never stdin, even if a task's gold actions include a respond
        return env

    def tasks(self, domain: str, split: str) -> list[Any]:
        """v1's task list for ``domain``/``split`` (its order), loaded once."""
        key = (domain, split)
        loaded = self._tasks.get(key)  # no lock once loaded: slime's event loop reads here (integer prompts)
        if loaded is not None:
            return loaded
        with self._lock:
            if key not in self._tasks:
                env = self.v1_env(domain, split)
                self._tasks[key] = list(env.tasks)
                if domain not in self._domains:
                    self._domains[domain] = Tau1Domain.from_env(self.mods, domain, env)
            return self._tasks[key]

    def domain(self, domain: str) -> Tau1Domain:
        """The domain's pristine database and tools (loaded with its first split)."""
        built = self._domains.get(domain)
        if built is not None:
            return built
        with self._lock:
            if domain not in self._domains:
                self.tasks(domain, self.splits(domain)[0])
            return self._domains[domain]

    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        return [TaskRef("tau1", domain, split, str(i)) for i in range(len(self.tasks(domain, split)))]

    def task(self, ref: TaskRef) -> Any:
        """The v1 ``Task`` for ``ref``: its own dump when the row carries one, else v1's list."""
        self._check_split(ref.domain, ref.split)
        if ref.task is not None:
            try:
                return self.mods["types"].Task.model_validate(ref.task)
            except ValueError as exc:
                where = f"tau1/{ref.domain}/{ref.split}/{ref.task_id}"
                raise ConfigError(f"task of {where} is not a v1 task: {exc}") from exc
        tasks = self.tasks(ref.domain, ref.split)
        try:
            index = int(ref.task_id)
        except (TypeError, ValueError):
            index = -1
        if not 0 <= index < len(tasks):
            raise ConfigError(
                f"task_id={ref.task_id!r} is not a task index of tau1/{ref.domain}/{ref.split} (0..{len(tasks) - 1})"
            )
        return tasks[index]

    def task_dump(self, ref: TaskRef) -> dict[str, Any]:
        return self.task(ref).model_dump()

    def script(self, ref: TaskRef) -> TaskScript:
        return task_script(self.task(ref), ref.task_id)

    # --- episodes ------------------------------------------------------------------------------

    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> Tau1Session:
        mode = (options or EnvOptions()).reward_mode
        task = self.task(ref)
        return Tau1Session(self, ref, task, self.gold(ref.domain, ref.split, task), mode)

    def gold(self, domain: str, split: str, task: Any) -> dict[str, dict]:
        """The records the task's gold actions leave behind (``Tau1Domain.replay_gold``), once per task.

        v1 recomputes it on every reward; keyed on the task's content, since rows prepared earlier carry
        their own task.
        """
        key = (domain, split, json.dumps(task.model_dump(), sort_keys=True))
        with self._lock:
            cached = self._gold.get(key)
            if cached is None:
                cached = self._gold[key] = self.domain(domain).replay_gold(task)
            return cached

    def gold_writes(self, domain: str, split: str, task: Any) -> tuple[str, ...]:
        """The task's reference actions that change v1's database (``Tau1Domain.gold_writes``), once per task."""
        key = (domain, split, json.dumps(task.model_dump(), sort_keys=True))
        with self._lock:
            cached = self._writes.get(key)
            if cached is None:
                cached = self._writes[key] = self.domain(domain).gold_writes(task)
            return cached

    def package_version(self) -> dict[str, str]:
        return dict(self._version)

    def _check_split(self, domain: str, split: str) -> None:
        valid = self.splits(domain)
        if split not in valid:
            raise ConfigError(f"split={split!r} is unknown for tau1/{domain}; expected one of {', '.join(valid)}")
