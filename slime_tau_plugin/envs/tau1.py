"""τ-bench v1 backend (module ``tau_bench``, sierra-research/tau-bench; not on PyPI): retail and airline.

Why not drive v1's ``Env`` per episode: it re-reads its JSON database on construction, reset and reward,
replays the gold actions on every reward and hashes the whole database twice (~0.3 s retail, ~0.8 s
airline per episode, all under the GIL). Here v1's own tool classes run against an episode-private
view of a database loaded once per process, and the reward compares against a gold outcome computed
once per task. The comparison is exactly v1's: v1 compares ``sha256(str(to_hashable(data)))``, which is
type-strict (``50`` vs ``50.0`` differ) where ``==`` on dicts is not, so records are compared through
v1's own ``to_hashable``. ``reference_reward`` runs v1's own ``calculate_reward`` on a real v1 ``Env``.

Episode databases are copy-on-access: each table starts as a shallow copy of the pristine table and a
record is cloned the first time the episode looks it up by key, so only touched records are copied
(a whole-database pickle clone costs 15-45 ms, ``deepcopy`` 80-110 ms). This relies on v1's tools writing only
to records they fetched by key; their searches iterate tables read-only (audited for every v1 tool,
and the tests check that the pristine database is unchanged after hundreds of episodes).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import json
import os
import pickle
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import check_domain
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
from .cow import CopyOnAccessDict

if TYPE_CHECKING:
    from ..episode import TerminationReason

SPLITS: dict[str, tuple[str, ...]] = {"airline": ("test",), "retail": ("train", "test", "dev")}
"""v1 has no split listing API: these are the ``task_split`` values its env classes accept."""
STOP = "###STOP###"
RESPOND = "respond"
"""v1's ``RESPOND_ACTION_NAME``: how v1 logs what the agent says to the user (``{"content": text}``)."""
_ABSENT = object()
_PROTOCOL = pickle.HIGHEST_PROTOCOL


def _import_tau1() -> dict[str, Any]:
    """Import the parts of tau_bench we use; litellm (imported by v1's user module) must stay offline."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        modules = ("envs", "envs.base", "envs.user", "types")
        return {name: importlib.import_module(f"tau_bench.{name}") for name in modules}
    except ImportError as exc:
        raise ConfigError(
            "benchmark 'tau1' needs τ-bench v1 (not on PyPI): pip install litellm pydantic && "
            f"pip install --no-deps <a sierra-research/tau-bench checkout> ({exc})"
        ) from exc


@functools.cache
def _scripted_user_class() -> type:
    base = _import_tau1()["envs.user"].BaseUserSimulationEnv

    class ScriptedV1User(base):
        """Answers "Please go on." until ``stop_next`` is set, then ``###STOP###``."""

        def __init__(self) -> None:
            self.stop_next = False

        def reset(self, instruction: str | None = None) -> str:
            return instruction or ""

        def step(self, content: str) -> str:
            return STOP if self.stop_next else "Please go on."

        def get_total_cost(self) -> float:
            return 0.0

    return ScriptedV1User


def scripted_v1_user() -> Any:
    """A v1 user that needs neither an LLM nor a terminal, for v1 ``Env`` objects we drive ourselves.

    v1 ships none: its ``llm`` user calls a model in its constructor and its ``human`` user reads stdin.
    """
    return _scripted_user_class()()


def _clone(value: Any) -> Any:
    """An independent copy of JSON-like data (pickle round trip: ~3x faster than ``copy.deepcopy``)."""
    return pickle.loads(pickle.dumps(value, _PROTOCOL))


@dataclass(frozen=True)
class _Domain:
    """What v1 defines per domain, taken from a v1 ``Env`` so its own wiring decides (tools, wiki...)."""

    name: str
    pristine: dict[str, dict]
    """The database as v1's ``load_data()`` returns it; never written after loading."""
    tools: list[dict[str, Any]]
    """v1's tool schemas (OpenAI format), built once: every session shares this list read-only."""
    tools_map: dict[str, Any]
    terminate_tools: frozenset[str]
    wiki: str


def _episode_data(domain: _Domain) -> dict[str, CopyOnAccessDict]:
    return {name: CopyOnAccessDict(table, _clone) for name, table in domain.pristine.items()}


def _run_tool(domain: _Domain, data: dict[str, Any], name: str, kwargs: dict[str, Any]) -> tuple[Any, bool]:
    """Run one v1 tool the way v1's ``Env.step`` does; return (observation, raised-or-unknown)."""
    tool = domain.tools_map.get(name)
    if tool is None:
        return f"Unknown action {name}", True
    try:
        return tool.invoke(data=data, **kwargs), False
    except Exception as exc:  # noqa: BLE001 - v1 turns every tool exception into an observation
        return f"Error: {exc}", True


class Tau1Session(EnvSession):
    """One v1 episode: a copy-on-access database, v1's tools, and the action log v1's reward reads."""

    def __init__(self, backend: Tau1Backend, ref: TaskRef, task: Any, gold: dict[str, dict], mode: str) -> None:
        self._backend, self._ref, self.task, self._gold, self._mode = backend, ref, task, gold, mode
        self._domain = backend.domain(ref.domain)
        self.tools = self._domain.tools
        self.agent_system_prompt = self._domain.wiki
        self.script = task_script(task, ref.task_id)
        self.data: dict[str, Any] = _episode_data(self._domain)
        self.actions: list[tuple[str, dict[str, Any]]] = []
        """Everything v1 would have in ``env.actions``: tool calls and ``respond`` messages, in order."""

    def step(self, call: EnvToolCall) -> StepResult:
        # Copy the arguments: v1 tools store argument objects in the database (book_reservation's
        # passengers and payment_methods) and later tools mutate them in place.
        kwargs = _clone(dict(call.arguments))
        self.actions.append((call.name, kwargs))
        observation, raised = _run_tool(self._domain, self.data, call.name, kwargs)
        if not isinstance(observation, str):
            # v1 would fail validating its EnvResponse here (send_certificate returns None once a user
            # holds 3 certificates); keep the episode alive and report it as an error.
            return StepResult(str(observation), is_error=True, is_done=call.name in self._domain.terminate_tools)
        is_error = raised or observation.startswith("Error")
        return StepResult(observation, is_error=is_error, is_done=call.name in self._domain.terminate_tools)

    def record_message(self, role: str, content: str) -> None:
        # v1 checks outputs only in the agent's ``respond`` actions; user turns are not actions.
        if role == "assistant":
            self.actions.append((RESPOND, {"content": content}))

    def reward(self, termination: TerminationReason) -> RewardResult:
        if self._mode == "reference":
            return self.reference_reward(termination)
        if not termination.is_scored:  # v1 scores only a done episode (user stop or terminate tool)
            return _unscored(termination)
        db_match = self._db_matches_gold()
        reward = 1.0 if db_match else 0.0
        breakdown: dict[str, Any] = {"db_match": db_match, "reward_breakdown": {"r_actions": reward}}
        outputs = list(self.task.outputs)
        if outputs:
            said = [kw.get("content", "") for name, kw in self.actions if name == RESPOND]
            said += self._gold_responds()
            said = [str(text).lower().replace(",", "") for text in said]
            met = [any(output.lower() in text for text in said) for output in outputs]
            if not all(met):
                reward = 0.0
            breakdown["outputs_met"] = met
            breakdown["reward_breakdown"]["r_outputs"] = 1.0 if all(met) else 0.0
        breakdown.update(scored=True, termination=termination.value, reward_mode="fast")
        return RewardResult(reward, breakdown)

    def reference_reward(self, termination: TerminationReason) -> RewardResult:
        if not termination.is_scored:  # v1 scores only a done episode (user stop or terminate tool)
            return _unscored(termination)
        types = self._backend.mods["types"]
        index = _task_index(self._ref, len(self._backend.tasks(self._ref.domain, self._ref.split)))
        env = self._backend.v1_env(self._ref.domain, self._ref.split, index)
        # A copy of the task: v1's gold replay stores gold-action argument objects in its database.
        env.task = types.Task.model_validate(self.task.model_dump())
        # calculate_reward only reads env.data (hashes it) before replacing it with fresh data.
        env.data = {name: dict(dict.items(table)) for name, table in self.data.items()}
        env.actions = [types.Action(name=name, kwargs=kwargs) for name, kwargs in self.actions]
        result = env.calculate_reward()
        info = result.info
        breakdown: dict[str, Any] = {"scored": True, "termination": termination.value, "reward_mode": "reference"}
        if hasattr(info, "r_outputs"):
            met = [bool(info.outputs.get(output, False)) for output in self.task.outputs]
            # v1 reports only the outputs check here; the DB check is implied when it can be.
            db_match = True if result.reward == 1.0 else (False if all(met) else None)
            breakdown.update(db_match=db_match, outputs_met=met, reward_breakdown={"r_outputs": float(info.r_outputs)})
        else:
            breakdown.update(db_match=bool(info.r_actions), reward_breakdown={"r_actions": float(info.r_actions)})
            breakdown["gt_data_hash"] = info.gt_data_hash
        return RewardResult(float(result.reward), breakdown)

    def user_system_prompt(self) -> str:
        user_cls = self._backend.mods["envs.user"].LLMUserSimulationEnv
        # Its constructor calls the LLM; build_system_prompt needs no state.
        return user_cls.__new__(user_cls).build_system_prompt(instruction=self.task.instruction)

    # --- reward internals ----------------------------------------------------------------------

    def _gold_responds(self) -> list[str]:
        """v1's reward replays gold actions into ``env.actions`` before its outputs check (none are
        ``respond`` in v1's data, but a custom task could have them)."""
        return [str(a.kwargs.get("content", "")) for a in self.task.actions if a.name == RESPOND]

    def _db_matches_gold(self) -> bool:
        """Whether v1 would find ``hash(live) == hash(gold)``, looking only at records either side touched.

        v1 hashes ``str(to_hashable(data))``: a tuple display of sorted ``(key, repr(to_hashable(value)))``
        pairs. With equal key sets and untouched records shared, two such strings are equal iff every
        touched record's ``repr(to_hashable(record))`` is (a tuple display parses one way only).
        """
        to_hashable = self._backend.mods["envs.base"].to_hashable
        pristine = self._domain.pristine
        if self.data.keys() != pristine.keys() or not all(isinstance(t, CopyOnAccessDict) for t in self.data.values()):
            return self._db_matches_gold_slow()
        for name, table in self.data.items():
            gold, base = self._gold.get(name, {}), pristine[name]
            for key in table.owned | gold.keys():
                live = dict.get(table, key, _ABSENT)
                want = gold[key] if key in gold else dict.get(base, key, _ABSENT)
                if live is want:
                    continue
                if live is _ABSENT or want is _ABSENT:
                    return False
                if repr(to_hashable(live)) != repr(to_hashable(want)):
                    return False
        return True

    def _db_matches_gold_slow(self) -> bool:
        """Whole-database comparison with v1's own hash (only if a tool replaced a whole table)."""
        base = self._backend.mods["envs.base"]
        gold = gold_database(self._domain, self._gold)
        return base.consistent_hash(base.to_hashable(self.data)) == base.consistent_hash(base.to_hashable(gold))


def _unscored(termination: TerminationReason) -> RewardResult:
    note = "v1 scores an episode only when it is done (user stop or transfer); this one was cut off"
    return RewardResult(0.0, {"scored": False, "termination": termination.value, "note": note})


def _task_index(ref: TaskRef, n_tasks: int) -> int:
    """The ref's index into v1's task list, or 0 (a prepared row's task may no longer be in the list)."""
    try:
        index = int(ref.task_id)
    except (TypeError, ValueError):
        return 0
    return index if 0 <= index < n_tasks else 0


def gold_database(domain: _Domain, gold: dict[str, dict]) -> dict[str, dict]:
    """The whole gold database (pristine tables with the task's gold records applied)."""
    out: dict[str, dict] = {}
    for name, table in domain.pristine.items():
        merged = dict(table)
        for key, value in gold.get(name, {}).items():
            if value is _ABSENT:
                merged.pop(key, None)
            else:
                merged[key] = value
        out[name] = merged
    return out


def task_script(task: Any, task_id: str = "") -> TaskScript:
    """The task's instruction and gold solution (copies: callers may mutate the arguments)."""
    actions = tuple(GoldAction(a.name, _clone(dict(a.kwargs)), "assistant") for a in task.actions)
    return TaskScript(task.instruction, actions, tuple(task.outputs), task_id)


class Tau1Backend(EnvBackend):
    """Loads each domain's database once and each task's gold outcome once; episodes are cheap views."""

    name = "tau1"

    def __init__(self) -> None:
        self.mods = _import_tau1()
        self._lock = threading.RLock()
        self._domains: dict[str, _Domain] = {}
        self._tasks: dict[tuple[str, str], list[Any]] = {}
        self._gold: dict[tuple[str, str, str], dict[str, dict]] = {}
        self._version = _distribution_version()

    # --- tasks ---------------------------------------------------------------------------------

    def splits(self, domain: str) -> tuple[str, ...]:
        _check_domain(domain)
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
        with self._lock:
            if key not in self._tasks:
                env = self.v1_env(domain, split)
                self._tasks[key] = list(env.tasks)
                if domain not in self._domains:
                    self._domains[domain] = _Domain(
                        name=domain,
                        pristine=env.data,
                        tools=[cls.get_info() for cls in env.tools_map.values()],
                        tools_map=dict(env.tools_map),
                        terminate_tools=frozenset(env.terminate_tools),
                        wiki=env.wiki,
                    )
            return self._tasks[key]

    def domain(self, domain: str) -> _Domain:
        """The domain's pristine database and tools (loaded with its first split)."""
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
        """The records the task's gold actions leave behind, ``{table: {key: record or absent}}``.

        Computed once per task (v1 recomputes it on every reward); keyed on the task's content, since
        rows prepared earlier carry their own task.
        """
        key = (domain, split, json.dumps(task.model_dump(), sort_keys=True))
        with self._lock:
            cached = self._gold.get(key)
            if cached is None:
                cached = self._gold[key] = self._replay_gold(self.domain(domain), task)
            return cached

    @staticmethod
    def _replay_gold(domain: _Domain, task: Any) -> dict[str, dict]:
        # As v1's calculate_reward: every gold action except terminate tools, errors swallowed.
        data = _episode_data(domain)
        for action in task.actions:
            if action.name not in domain.terminate_tools and action.name != RESPOND:
                _run_tool(domain, data, action.name, _clone(dict(action.kwargs)))
        if data.keys() != domain.pristine.keys() or not all(isinstance(t, CopyOnAccessDict) for t in data.values()):
            raise EnvBackendError(f"tau1/{domain.name}: a gold action replaced a whole table; cannot cache its outcome")
        return {name: {k: dict.get(table, k, _ABSENT) for k in table.owned} for name, table in data.items()}

    def package_version(self) -> dict[str, str]:
        return dict(self._version)

    def _check_split(self, domain: str, split: str) -> None:
        valid = self.splits(domain)
        if split not in valid:
            raise ConfigError(f"split={split!r} is unknown for tau1/{domain}; expected one of {', '.join(valid)}")


def _check_domain(domain: str) -> None:
    check_domain("tau1", domain)


def _distribution_version() -> dict[str, str]:
    """tau-bench's installed version (its setup.py names the distribution ``tau_bench``)."""
    for dist in ("tau-bench", "tau_bench"):
        try:
            return {"tau_package": "tau-bench", "tau_version": importlib.metadata.version(dist)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"tau_package": "tau-bench", "tau_version": "unknown"}
