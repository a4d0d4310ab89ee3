"""τ-bench v1 domain data held once per process: imported modules, pristine databases, tools, gold outcomes.

v1's own ``Env`` re-reads its JSON database on construction, reset and reward. Here a domain's database
is loaded once per process (``Tau1Domain``) and each episode gets a copy-on-access view of it: each table
starts as a shallow copy of the pristine table and a record is cloned the first time the episode looks
it up by key, so only touched records are copied (a whole-database pickle clone costs 15-45 ms,
``deepcopy`` 80-110 ms). This relies on v1's tools writing only to records they fetched by key; their
searches iterate tables read-only (audited for every v1 tool, and the tests check that the pristine
database is unchanged after hundreds of episodes). A task's gold outcome is replayed once per task.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import pickle
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.envs.base import STOP_MARKER, GoldAction, TaskScript
from slime_tau_plugin.engine.envs.copy_on_access import CopyOnAccessDict
from slime_tau_plugin.engine.errors import ConfigError, EnvBackendError

RESPOND = "respond"
"""v1's ``RESPOND_ACTION_NAME``: how v1 logs what the agent says to the user (``{"content": text}``)."""
ABSENT = object()
"""A gold record that the task's gold actions deleted (or a key missing on one side of a comparison)."""
_PROTOCOL = pickle.HIGHEST_PROTOCOL
_MODULES = ("envs", "envs.base", "envs.user", "types")


def import_tau1() -> dict[str, Any]:
    """Import the parts of tau_bench we use; litellm (imported by v1's user module) must stay offline."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        return {name: importlib.import_module(f"tau_bench.{name}") for name in _MODULES}
    except ImportError as exc:
        raise ConfigError(
            "benchmark 'tau1' needs τ-bench v1 (not on PyPI): pip install litellm pydantic && "
            f"pip install --no-deps <a sierra-research/tau-bench checkout> ({exc})"
        ) from exc


@functools.cache
def _scripted_user_class() -> type:
    base = import_tau1()["envs.user"].BaseUserSimulationEnv

    class ScriptedV1User(base):
        """Answers "Please go on." until ``stop_next`` is set, then ``###STOP###``."""

        def __init__(self) -> None:
            self.stop_next = False

        def reset(self, instruction: str | None = None) -> str:
            return instruction or ""

        def step(self, content: str) -> str:
            return STOP_MARKER if self.stop_next else "Please go on."

        def get_total_cost(self) -> float:
            return 0.0

    return ScriptedV1User


def scripted_v1_user() -> Any:
    """A v1 user that needs neither an LLM nor a terminal, for v1 ``Env`` objects we drive ourselves.

    v1 ships none: its ``llm`` user calls a model in its constructor and its ``human`` user reads stdin.
    """
    return _scripted_user_class()()


def clone(value: Any) -> Any:
    """An independent copy of JSON-like data (pickle round trip: ~3x faster than ``copy.deepcopy``)."""
    return pickle.loads(pickle.dumps(value, _PROTOCOL))


@dataclass(frozen=True)
class Tau1Domain:
    """What v1 defines per domain, taken from a v1 ``Env`` so its own wiring decides (tools, wiki...)."""

    name: str
    mods: dict[str, Any] = field(repr=False, compare=False)
    """The imported tau_bench modules (``import_tau1``)."""
    pristine: dict[str, dict] = field(repr=False)
    """The database as v1's ``load_data()`` returns it; never written after loading."""
    tools: list[dict[str, Any]] = field(repr=False)
    """v1's tool schemas (OpenAI format), built once: every session shares this list read-only."""
    tools_map: dict[str, Any] = field(repr=False)
    terminate_tools: frozenset[str]
    wiki: str = field(repr=False)
    """v1's domain policy: the agent's system prompt."""

    @classmethod
    def from_env(cls, mods: dict[str, Any], name: str, env: Any) -> Tau1Domain:
        """The domain as the v1 ``Env`` ``env`` wires it (its loaded data becomes the pristine database)."""
        return cls(
            name=name,
            mods=mods,
            pristine=env.data,
            tools=[tool.get_info() for tool in env.tools_map.values()],
            tools_map=dict(env.tools_map),
            terminate_tools=frozenset(env.terminate_tools),
            wiki=env.wiki,
        )

    def episode_data(self) -> dict[str, CopyOnAccessDict]:
        """A private copy-on-access view of the pristine database for one episode."""
        return {name: CopyOnAccessDict(table, clone) for name, table in self.pristine.items()}

    def is_view(self, data: dict[str, Any]) -> bool:
        """Whether ``data`` still has every table as a copy-on-access view (no tool replaced a whole table)."""
        return data.keys() == self.pristine.keys() and all(isinstance(t, CopyOnAccessDict) for t in data.values())

    def run_tool(self, data: dict[str, Any], name: str, kwargs: dict[str, Any]) -> tuple[Any, bool]:
        """Run one v1 tool the way v1's ``Env.step`` does; return (observation, raised-or-unknown)."""
        tool = self.tools_map.get(name)
        if tool is None:
            return f"Unknown action {name}", True
        try:
            return tool.invoke(data=data, **kwargs), False
        except Exception as exc:  # noqa: BLE001 - v1 turns every tool exception into an observation
            return f"Error: {exc}", True

    def replay_gold(self, task: Any) -> dict[str, dict]:
        """The records the task's gold actions leave behind, ``{table: {key: record or ABSENT}}``.

        As v1's ``calculate_reward``: every gold action except terminate tools, errors swallowed.
        """
        data = self.episode_data()
        for action in task.actions:
            if action.name not in self.terminate_tools and action.name != RESPOND:
                self.run_tool(data, action.name, clone(dict(action.kwargs)))
        if not self.is_view(data):
            raise EnvBackendError(f"tau1/{self.name}: a gold action replaced a whole table; cannot cache its outcome")
        return {name: {k: dict.get(table, k, ABSENT) for k in table.owned} for name, table in data.items()}

    def gold_writes(self, task: Any) -> tuple[str, ...]:
        """The names of the task's reference actions that change the database, in order.

        v1 has no tool types: what its reward checks is the database, so a write is an action that changed a
        record when the reference actions are replayed in order (as :meth:`replay_gold`; a read only copies it).
        """
        data = self.episode_data()
        writes = []
        for action in task.actions:
            if action.name in self.terminate_tools or action.name == RESPOND:
                continue
            before = {
                (name, key): _kept(dict.get(table, key, ABSENT)) for name, table in data.items() for key in table.owned
            }
            self.run_tool(data, action.name, clone(dict(action.kwargs)))
            if any(
                dict.get(table, key, ABSENT) != before.get((name, key), self.pristine[name].get(key, ABSENT))
                for name, table in data.items()
                for key in table.owned
            ):
                writes.append(action.name)
        return tuple(writes)


def _kept(value: Any) -> Any:
    return value if value is ABSENT else clone(value)


def gold_database(domain: Tau1Domain, gold: dict[str, dict]) -> dict[str, dict]:
    """The whole gold database (pristine tables with the task's gold records applied)."""
    out: dict[str, dict] = {}
    for name, table in domain.pristine.items():
        merged = dict(table)
        for key, value in gold.get(name, {}).items():
            if value is ABSENT:
                merged.pop(key, None)
            else:
                merged[key] = value
        out[name] = merged
    return out


def task_script(task: Any, task_id: str = "") -> TaskScript:
    """The task's instruction and gold solution (copies: callers may mutate the arguments)."""
    actions = tuple(GoldAction(a.name, clone(dict(a.kwargs)), "assistant") for a in task.actions)
    return TaskScript(task.instruction, actions, tuple(task.outputs), task_id)


def distribution_version() -> dict[str, str]:
    """tau-bench's installed version (its setup.py names the distribution ``tau_bench``)."""
    for dist in ("tau-bench", "tau_bench"):
        try:
            return {"tau_package": "tau-bench", "tau_version": importlib.metadata.version(dist)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"tau_package": "tau-bench", "tau_version": "unknown"}
