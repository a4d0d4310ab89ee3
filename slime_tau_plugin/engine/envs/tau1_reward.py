"""τ-bench v1's reward at a fraction of its cost, equal to v1's ``calculate_reward`` (the parity tests prove it).

v1's reward replays the gold actions on a freshly loaded database and compares
``sha256(str(to_hashable(data)))`` of both databases (~0.3 s retail, ~0.8 s airline per episode, under
the GIL). Here the gold outcome is computed once per task (``Tau1Domain.replay_gold``) and only the
records either side touched are compared, through v1's own ``to_hashable``: v1's hash is type-strict
(``50`` vs ``50.0`` differ) where ``==`` on dicts is not. The outputs check is v1's: every expected
output must appear, lowercased and without commas, in something the agent said. ``reference_reward``
runs v1's own ``calculate_reward`` on a real v1 ``Env``.

v1's reward is all-or-nothing (database match times outputs check). The breakdown also carries each part
as a fraction, ``partial_scores``, and their mean, ``partial_score`` in [0, 1], for shaping and for
watching a run learn, named like τ²'s: ``DB`` 1/0 (the database equals the gold one), ``ACTION`` gold
tool calls made / expected (same name and arguments, as τ²'s action check; v1 itself has no such part)
and, for a task with expected outputs, ``OUTPUTS`` outputs said / expected. A solved episode has
``partial_score`` 1.0; one v1 does not score (cut off) has 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.envs.base import RewardResult
from slime_tau_plugin.engine.envs.tau1_data import ABSENT, RESPOND, Tau1Domain, gold_database

if TYPE_CHECKING:
    from slime_tau_plugin.engine.episode.result import TerminationReason

Actions = list[tuple[str, dict[str, Any]]]
"""Everything v1 would have in ``env.actions``: tool calls and ``respond`` messages, in order."""


def fast_reward(
    domain: Tau1Domain,
    task: Any,
    data: dict[str, Any],
    gold: dict[str, dict],
    actions: Actions,
    termination: TerminationReason,
) -> RewardResult:
    """v1's reward for an episode whose database is ``data`` and whose action log is ``actions``."""
    if not termination.is_scored:  # v1 scores only a done episode (user stop or terminate tool)
        return unscored(termination)
    db_match = db_matches_gold(domain, data, gold)
    reward = 1.0 if db_match else 0.0
    breakdown: dict[str, Any] = {"db_match": db_match, "reward_breakdown": {"r_actions": reward}}
    outputs = list(task.outputs)
    if outputs:
        met = outputs_met(task, actions)
        if not all(met):
            reward = 0.0
        breakdown["outputs_met"] = met
        breakdown["reward_breakdown"]["r_outputs"] = 1.0 if all(met) else 0.0
    breakdown.update(scored=True, termination=termination.value, reward_mode="fast")
    breakdown.update(partial(task, actions, db_match, breakdown.get("outputs_met"), reward))
    return RewardResult(reward, breakdown)


def partial(task: Any, actions: Actions, db_match: bool, outputs: list[bool] | None, reward: float) -> dict[str, Any]:
    """``partial_scores`` (DB 1/0, gold calls made / expected, outputs said / expected) and their mean."""
    parts = {"DB": 1.0 if db_match else 0.0}
    gold = [(a.name, a.kwargs) for a in task.actions if a.name != RESPOND]
    if gold:
        parts["ACTION"] = sum((name, kwargs) in actions for name, kwargs in gold) / len(gold)
    if outputs:
        parts["OUTPUTS"] = sum(outputs) / len(outputs)
    score = 1.0 if reward == 1.0 else sum(parts.values()) / len(parts)
    return {"partial_scores": parts, "partial_score": score}


def outputs_met(task: Any, actions: Actions) -> list[bool]:
    """For each expected output, whether the agent said it (v1's check, over the ``respond`` actions).

    v1's reward replays gold actions into ``env.actions`` before its outputs check, so gold ``respond``
    actions count too (none are in v1's data, but a custom task could have them).
    """
    said = [kwargs.get("content", "") for name, kwargs in actions if name == RESPOND]
    said += [str(a.kwargs.get("content", "")) for a in task.actions if a.name == RESPOND]
    said = [str(text).lower().replace(",", "") for text in said]
    return [any(output.lower() in text for text in said) for output in task.outputs]


def db_matches_gold(domain: Tau1Domain, data: dict[str, Any], gold: dict[str, dict]) -> bool:
    """Whether v1 would find ``hash(live) == hash(gold)``, looking only at records either side touched.

    v1 hashes ``str(to_hashable(data))``: a tuple display of sorted ``(key, repr(to_hashable(value)))``
    pairs. With equal key sets and untouched records shared, two such strings are equal iff every
    touched record's ``repr(to_hashable(record))`` is (a tuple display parses one way only).
    """
    if not domain.is_view(data):
        return _db_matches_gold_slow(domain, data, gold)
    to_hashable = domain.mods["envs.base"].to_hashable
    for name, table in data.items():
        table_gold, base = gold.get(name, {}), domain.pristine[name]
        for key in table.owned | table_gold.keys():
            live = dict.get(table, key, ABSENT)
            want = table_gold[key] if key in table_gold else dict.get(base, key, ABSENT)
            if live is want:
                continue
            if live is ABSENT or want is ABSENT:
                return False
            if repr(to_hashable(live)) != repr(to_hashable(want)):
                return False
    return True


def _db_matches_gold_slow(domain: Tau1Domain, data: dict[str, Any], gold: dict[str, dict]) -> bool:
    """Whole-database comparison with v1's own hash (only if a tool replaced a whole table)."""
    base = domain.mods["envs.base"]
    expected = gold_database(domain, gold)
    return base.consistent_hash(base.to_hashable(data)) == base.consistent_hash(base.to_hashable(expected))


def reference_reward(
    domain: Tau1Domain,
    new_env: Callable[[], Any],
    task: Any,
    data: dict[str, Any],
    actions: Actions,
    termination: TerminationReason,
) -> RewardResult:
    """v1's own ``calculate_reward`` on a v1 ``Env`` set to the episode's state.

    ``new_env`` builds that ``Env`` (v1 reads its JSON database: ~0.1 s), only for a scored episode.
    """
    if not termination.is_scored:  # v1 scores only a done episode (user stop or terminate tool)
        return unscored(termination)
    env = new_env()
    types = domain.mods["types"]
    # A copy of the task: v1's gold replay stores gold-action argument objects in its database.
    env.task = types.Task.model_validate(task.model_dump())
    # calculate_reward only reads env.data (hashes it) before replacing it with fresh data.
    env.data = {name: dict(dict.items(table)) for name, table in data.items()}
    env.actions = [types.Action(name=name, kwargs=kwargs) for name, kwargs in actions]
    live_hash = env.get_data_hash()
    result = env.calculate_reward()
    info = result.info
    breakdown: dict[str, Any] = {"scored": True, "termination": termination.value, "reward_mode": "reference"}
    if hasattr(info, "r_outputs"):
        met = [bool(info.outputs.get(output, False)) for output in task.outputs]
        # v1 reports only the outputs check here; its gold replay is left in env.data, so hash that.
        db_match = live_hash == env.get_data_hash()
        breakdown.update(db_match=db_match, outputs_met=met, reward_breakdown={"r_outputs": float(info.r_outputs)})
    else:
        db_match = bool(info.r_actions)
        breakdown.update(db_match=db_match, reward_breakdown={"r_actions": float(info.r_actions)})
        breakdown["gt_data_hash"] = info.gt_data_hash
    breakdown.update(partial(task, actions, db_match, breakdown.get("outputs_met"), float(result.reward)))
    return RewardResult(float(result.reward), breakdown)


def unscored(termination: TerminationReason) -> RewardResult:
    """Reward 0 for an episode v1 would never have scored (cut off by turns, budget or length)."""
    note = "v1 scores an episode only when it is done (user stop or transfer); this one was cut off"
    breakdown = {"scored": False, "termination": termination.value, "note": note}
    return RewardResult(0.0, {**breakdown, "partial_scores": {}, "partial_score": 0.0})
