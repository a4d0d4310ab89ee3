"""τ²'s reward at a fraction of its cost, equal to ``evaluate_simulation`` (the parity tests prove it).

``evaluate_simulation`` rebuilds three environments from disk per episode (the predicted one by
replaying every tool call, the gold one by replaying the task's reference actions) and hashes whole
databases: 0.2–1 s of pure Python under the GIL. Here, per process and domain, the pristine database
is loaded once and each episode gets copy-on-access tables over it (``copy_on_access.py``); per task, the gold
database is built once, exactly the way τ²'s environment evaluator builds it; per episode, only the
records either side touched are compared, with τ²'s own hash function. The action, communicate and
NL-assertion parts are τ²'s own evaluators called on the episode's messages, and the parts are combined
as ``evaluate_simulation`` combines them.

τ²'s reward is all-or-nothing: the product of 0/1 parts. For shaping and for watching a run learn, the
breakdown (``reward_breakdown``) also carries each part as a fraction, ``partial_scores``, and their mean,
``partial_score`` in [0, 1]. The parts are the reward-basis parts τ² scored (the keys of its breakdown, so
an excluded NL part is not one) that have something to check: ``DB`` 1/0 (the database equals the gold
one), ``ENV_ASSERTION`` assertions met / total, ``COMMUNICATE`` required facts said / expected,
``NL_ASSERTION`` assertions met / total; plus ``ACTION``, gold actions matched / expected, for every task
with gold actions even when its basis leaves actions out (retail and airline score ``DB`` and
``COMMUNICATE``: with no facts to say, the 0/1 database check alone would grade nothing). A solved episode
(reward 1) has ``partial_score`` 1.0 however it got there; an episode τ² does not score (cut off) or
cannot score (no criteria) has ``partial_score`` equal to its reward.
"""

from __future__ import annotations

import uuid
from typing import Any

from slime_tau_plugin.engine.envs.copy_on_access import touched_dump_include
from slime_tau_plugin.engine.envs.tau2_data import GoldOutcome, Tau2Domain, _db, _hash
from slime_tau_plugin.engine.errors import JudgeError

ENV_BASES = ("DB", "ENV_ASSERTION")
NL_EXCLUDED = "excluded from the reward (tau_nl_assertions: exclude)"


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
            evaluators["nl"] = lambda: _judged(m, task, messages)
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


def _judged(mods: Any, task: Any, messages: list[Any]) -> Any:
    """τ's NL-assertion evaluator; its failures (the judge's endpoint) become :class:`JudgeError`."""
    try:
        return mods["evaluator.evaluator_nl_assertions"].NLAssertionsEvaluator.calculate_reward(
            task=task, full_trajectory=messages
        )
    except Exception as exc:
        raise JudgeError(f"NL-assertion judge failed: {type(exc).__name__}: {exc}") from exc


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


def has_nl_assertions(task: Any) -> bool:
    criteria = task.evaluation_criteria
    return criteria is not None and any(getattr(b, "value", b) == "NL_ASSERTION" for b in criteria.reward_basis)


def without_nl_assertions(task: Any) -> Any:
    criteria = task.evaluation_criteria
    basis = [b for b in criteria.reward_basis if getattr(b, "value", b) != "NL_ASSERTION"]
    return task.model_copy(update={"evaluation_criteria": criteria.model_copy(update={"reward_basis": basis})})


def partial_scores(info: Any) -> dict[str, float]:
    """Each part of the episode's score as the fraction of its checks that passed (module docstring)."""
    checks = {
        "ENV_ASSERTION": [c.met for c in info.env_assertions or []],
        "ACTION": [c.action_match for c in info.action_checks or []],
        "COMMUNICATE": [c.met for c in info.communicate_checks or []],
        "NL_ASSERTION": [c.met for c in getattr(info, "nl_assertions", None) or []],
    }
    out: dict[str, float] = {}
    for key, value in (info.reward_breakdown or {}).items():
        name = getattr(key, "value", str(key))
        if name not in checks:  # DB, and any part a later τ² adds: τ²'s own 0/1
            out[name] = float(value)
        elif checks[name]:
            out[name] = _fraction(checks[name])
    if out and checks["ACTION"]:
        out["ACTION"] = _fraction(checks["ACTION"])
    return out


def partial_score(reward: float, parts: dict[str, float]) -> float:
    """The mean of ``parts``; 1.0 for a solved episode, the reward when nothing was graded."""
    if reward == 1.0 or not parts:
        return float(reward)
    return sum(parts.values()) / len(parts)


def _fraction(passed: list[Any]) -> float:
    return sum(map(bool, passed)) / len(passed)


def reward_breakdown(info: Any) -> dict[str, Any]:
    """A JSON-friendly summary of τ²'s ``RewardInfo``, with the partial scores."""
    parts = partial_scores(info)
    out: dict[str, Any] = {
        "reward_breakdown": {getattr(k, "value", str(k)): v for k, v in (info.reward_breakdown or {}).items()},
        "partial_scores": parts,
        "partial_score": partial_score(float(info.reward), parts),
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


def reference_reward_info(
    domain: Tau2Domain, task: Any, messages: list[Any], *, scored: bool, nl_assertions: str
) -> tuple[Any, bool]:
    """τ²'s own ``evaluate_simulation`` on the episode's messages; also says whether NL assertions were excluded."""
    sim_mod, ev = domain.mods["data_model.simulation"], domain.mods["evaluator.evaluator"]
    reason = sim_mod.TerminationReason.USER_STOP if scored else sim_mod.TerminationReason.MAX_STEPS
    sim = sim_mod.SimulationRun(
        id=uuid.uuid4().hex,
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=reason,
        messages=messages,
    )
    evaluation, excluded = ev.EvaluationType.ALL, False
    if has_nl_assertions(task):
        if nl_assertions == "exclude":
            task, excluded = without_nl_assertions(task), True
        else:
            evaluation = ev.EvaluationType.ALL_WITH_NL_ASSERTIONS
    info = ev.evaluate_simulation(
        simulation=sim,
        task=task,
        evaluation_type=evaluation,
        solo_mode=False,
        domain=domain.name,
        **({"env_kwargs": env_kwargs} if (env_kwargs := domain.env_kwargs(task)) else {}),
    )
    return info, excluded
