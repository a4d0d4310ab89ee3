"""τ²'s reward at a fraction of its cost, equal to ``evaluate_simulation`` (the parity tests prove it).

``evaluate_simulation`` rebuilds three environments from disk per episode (the predicted one by
replaying every tool call, the gold one by replaying the task's reference actions) and hashes whole
databases: 0.2–1 s of pure Python under the GIL. Here, per process and domain, the pristine database
is loaded once and each episode gets copy-on-access tables over it (``cow.py``); per task, the gold
database is built once, exactly the way τ²'s environment evaluator builds it; per episode, only the
records either side touched are compared, with τ²'s own hash function. The action, communicate and
NL-assertion parts are τ²'s own evaluators called on the episode's messages, and the parts are combined
as ``evaluate_simulation`` combines them.
"""

from __future__ import annotations

import inspect
import pickle
import threading
from dataclasses import dataclass, field
from typing import Any

from .cow import cow_model, touched_dump_include

ENV_BASES = ("DB", "ENV_ASSERTION")
NL_EXCLUDED = "excluded from the reward (tau_nl_assertions: exclude)"


class PristineDB:
    """A domain's pristine database and the cheapest way to hand each episode a private copy of it."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.tabular = any(isinstance(value, dict) for value in db.__dict__.values())
        self._pickled = None if self.tabular else pickle.dumps(db, protocol=pickle.HIGHEST_PROTOCOL)

    def clone(self) -> Any:
        """Copy-on-access tables over the pristine ones, else an unpickled copy (bytes made once)."""
        return cow_model(self.db) if self.tabular else pickle.loads(self._pickled)


@dataclass(slots=True)
class GoldOutcome:
    """A task's reference end state (built once per task and process)."""

    agent_db: Any
    user_db: Any
    hashes: dict[str, str | None] = field(default_factory=dict)
    """Whole-database hashes, computed only if a cheap comparison is impossible."""


class Tau2Domain:
    """Everything fixed for one τ² domain in this process: pristine data, tools, policy, gold outcomes."""

    def __init__(self, mods: dict[str, Any], domain: str) -> None:
        self.mods = mods
        self.name = domain
        self.constructor = mods["registry"].registry.get_env_constructor(domain)
        self._params = set(inspect.signature(self.constructor).parameters)
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
        self.policy = pristine.get_policy()
        self._gold: dict[str, GoldOutcome] = {}
        self._lock = threading.Lock()

    def new_env(self) -> Any:
        """A fresh environment over private copies of the pristine databases (no disk read)."""
        return self.constructor(**{name: copy.clone() for name, copy in self._copies.items()})

    def initialized_env(self, task: Any) -> Any:
        """``new_env`` set to the task's initial state, as τ²'s orchestrator and evaluator set it."""
        env = self.new_env()
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


def fast_reward_info(
    domain: Tau2Domain, task: Any, env: Any, messages: list[Any], *, scored: bool, nl_assertions: str
) -> Any:
    """τ²'s ``RewardInfo`` for a finished episode whose live environment is ``env``.

    Mirrors ``evaluate_simulation(..., EvaluationType.ALL[_WITH_NL_ASSERTIONS])``: unscored terminations
    get 0, the reward is the product of the parts named by the task's ``reward_basis``. With
    ``nl_assertions="exclude"`` the NL part is left out and ``info["nl_assertions"]`` says so.
    """
    m = domain.mods
    sim, tasks_mod = m["data_model.simulation"], m["data_model.tasks"]
    reward_type = tasks_mod.RewardType
    if not scored:
        return sim.RewardInfo(reward=0.0, info={"note": "episode did not end with a user or agent stop"})
    criteria = task.evaluation_criteria
    if criteria is None:
        return sim.RewardInfo(reward=1.0, info={"note": "No evaluation criteria"})
    basis = {getattr(b, "value", b) for b in criteria.reward_basis}
    evaluators = {
        "env": lambda: _env_reward(domain, task, env),
        "action": lambda: m["evaluator.evaluator_action"].ActionEvaluator.calculate_reward(
            task=task, full_trajectory=messages
        ),
        "communicate": lambda: m["evaluator.evaluator_communicate"].CommunicateEvaluator.calculate_reward(
            task=task, full_trajectory=messages
        ),
    }
    info: dict[str, Any] = {}
    if reward_type.NL_ASSERTION.value in basis:
        if nl_assertions == "exclude":
            info["nl_assertions"] = NL_EXCLUDED
        else:
            evaluators["nl"] = lambda: m["evaluator.evaluator_nl_assertions"].NLAssertionsEvaluator.calculate_reward(
                task=task, full_trajectory=messages
            )
    parts = {name: run() for name, run in evaluators.items()}  # all run, as in τ², for the same breakdown
    bases = {"env": set(ENV_BASES), "action": {"ACTION"}, "nl": {"NL_ASSERTION"}, "communicate": {"COMMUNICATE"}}
    reward, breakdown = 1.0, {}
    for name in ("env", "action", "nl", "communicate"):  # τ²'s order of combination
        if name in parts and basis & bases[name]:
            breakdown.update(parts[name].reward_breakdown or {})
            reward *= parts[name].reward
    nl = parts.get("nl")
    return sim.RewardInfo(
        reward=reward,
        db_check=parts["env"].db_check,
        env_assertions=parts["env"].env_assertions,
        action_checks=parts["action"].action_checks,
        nl_assertions=nl.nl_assertions if nl is not None else None,
        communicate_checks=parts["communicate"].communicate_checks,
        reward_basis=criteria.reward_basis,
        reward_breakdown=breakdown,
        info=info or None,
    )


def _env_reward(domain: Tau2Domain, task: Any, env: Any) -> Any:
    """DB match and env assertions on the live environment, against the cached gold outcome."""
    sim, reward_type = domain.mods["data_model.simulation"], domain.mods["data_model.tasks"].RewardType
    criteria = task.evaluation_criteria
    if criteria.actions is None and criteria.env_assertions is None:
        return sim.RewardInfo(reward=1.0, db_check=sim.DBCheck(db_match=True, db_reward=1.0))
    env.sync_tools()  # τ²'s evaluator replays into an environment whose last step is a sync
    gold = domain.gold(task)
    db_match = _same_db(domain, _db(env.tools), gold, "agent") and _same_db(domain, _db(env.user_tools), gold, "user")
    db_reward = 1.0 if db_match else 0.0
    checks, assertion_reward = [], 1.0
    for assertion in criteria.env_assertions or []:
        met = env.run_env_assertion(assertion, raise_assertion_error=False)
        checks.append(sim.EnvAssertionCheck(env_assertion=assertion, met=met, reward=1.0 if met else 0.0))
        assertion_reward *= 1.0 if met else 0.0
    reward, breakdown = 1.0, {}
    basis = set(criteria.reward_basis)
    if reward_type.DB in basis:
        breakdown[reward_type.DB] = db_reward
        reward *= db_reward
    if reward_type.ENV_ASSERTION in basis:
        breakdown[reward_type.ENV_ASSERTION] = assertion_reward
        reward *= assertion_reward
    return sim.RewardInfo(
        reward=reward,
        db_check=sim.DBCheck(db_match=db_match, db_reward=db_reward),
        env_assertions=checks,
        reward_breakdown=breakdown,
    )


def _same_db(domain: Tau2Domain, live: Any, gold: GoldOutcome, side: str) -> bool:
    """Does ``live`` hash like the gold database? Compares only touched records when it can."""
    reference = gold.agent_db if side == "agent" else gold.user_db
    if live is None or reference is None:
        return live is None and reference is None
    include = touched_dump_include(live, reference)
    if include is not None:
        get_hash = domain.mods["utils.utils"].get_dict_hash
        return get_hash(live.model_dump(include=include)) == get_hash(reference.model_dump(include=include))
    if side not in gold.hashes:
        gold.hashes[side] = _hash(domain.mods, reference)
    return _hash(domain.mods, live) == gold.hashes[side]


def _db(toolkit: Any) -> Any:
    return toolkit.db if toolkit is not None else None


def _hash(mods: dict[str, Any], db: Any) -> str | None:
    return mods["utils.utils"].get_dict_hash(db.model_dump()) if db is not None else None
