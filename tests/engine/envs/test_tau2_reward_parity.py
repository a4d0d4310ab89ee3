"""Our cached τ² reward equals τ²'s own ``evaluate_simulation`` on many right and wrong episodes.

Each episode runs real τ² tools against a session's copy-on-access database, then both rewards are
computed from the same episode: ``reward`` (cached gold outcome, touched-records comparison) and
``reference_reward`` (τ²'s evaluator, which rebuilds environments from disk and hashes whole
databases). Episodes vary the reference solution: complete, one action dropped, one argument changed,
an extra write from another task, nothing done, the expected information left unsaid, and scored vs
unscored endings, over retail, airline and telecom.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from slime_tau_plugin.engine.envs import EnvToolCall, GoldAction, TaskScript
from slime_tau_plugin.engine.episode.result import TerminationReason

pytestmark = pytest.mark.usefixtures("tau2_backend")

PLAN = {("retail", "train"): 12, ("airline", "base"): 6, ("telecom", "train"): 60}
"""Tasks per set; each task yields several episode variants (see ``variants``)."""


@dataclass(frozen=True)
class Variant:
    name: str
    actions: tuple[GoldAction, ...]
    say_outputs: bool = True
    termination: TerminationReason = TerminationReason.USER_STOP


def _perturb(action: GoldAction, rng: random.Random) -> GoldAction:
    """The same action with one string argument changed (a plausible agent mistake)."""
    keys = [k for k, v in action.arguments.items() if isinstance(v, str)]
    if not keys:
        return GoldAction(action.name, {**action.arguments, "unexpected": 1}, action.requestor)
    key = rng.choice(keys)
    return GoldAction(action.name, {**action.arguments, key: action.arguments[key] + "0"}, action.requestor)


def variants(script: TaskScript, other: TaskScript, rng: random.Random) -> list[Variant]:
    gold = script.gold_actions
    out = [
        Variant("gold", gold),
        Variant("nothing", ()),
        Variant("gold, unscored end", gold, termination=TerminationReason.MAX_TURNS),
    ]
    if gold:
        drop = rng.randrange(len(gold))
        out.append(Variant("one action dropped", gold[:drop] + gold[drop + 1 :]))
        change = rng.randrange(len(gold))
        out.append(Variant("one argument changed", gold[:change] + (_perturb(gold[change], rng),) + gold[change + 1 :]))
    if other.gold_actions:
        out.append(Variant("extra write from another task", gold + (other.gold_actions[-1],)))
    if script.gold_outputs:
        out.append(Variant("outputs not said", gold, say_outputs=False))
    return out


def play(backend, ref, variant: Variant, outputs: tuple[str, ...]):
    session = backend.open(ref)
    session.record_message("user", session.script.user_instructions)
    for i, action in enumerate(variant.actions):
        call = EnvToolCall(action.name, dict(action.arguments), f"call-{i}")
        if action.requestor == "user":
            session.user_step(call)
        else:
            session.step(call)
        session.record_message("assistant", "Done with that step.")
    if variant.say_outputs and outputs:
        session.record_message("assistant", "Here is what I found: " + "; ".join(outputs))
    return session


def _checks(result) -> dict:
    """The breakdown without the free-text note (ours names our termination reason)."""
    return {k: v for k, v in result.breakdown.items() if k != "note"}


def test_fast_reward_equals_tau2_evaluation(tau2_backend):
    rng = random.Random(7)
    episodes, mismatches, rewards = 0, [], {0.0: 0, 1.0: 0}
    for (domain, split), count in PLAN.items():
        refs = tau2_backend.task_refs(domain, split)
        picked = rng.sample(refs, min(count, len(refs)))
        for ref in picked:
            script = tau2_backend.script(ref)
            other = tau2_backend.script(rng.choice(refs))
            for variant in variants(script, other, rng):
                session = play(tau2_backend, ref, variant, script.gold_outputs)
                fast = session.reward(variant.termination)
                reference = session.reference_reward(variant.termination)
                episodes += 1
                rewards[fast.reward] = rewards.get(fast.reward, 0) + 1
                if (fast.reward, _checks(fast)) != (reference.reward, _checks(reference)):
                    mismatches.append((domain, ref.task_id, variant.name, fast, reference))
    print(f"τ² reward parity: {episodes} episodes, rewards {rewards}, {len(mismatches)} mismatches")
    assert mismatches == []
    assert episodes >= 200
    assert rewards[1.0] >= 50 and rewards[0.0] >= 100, rewards


def test_episodes_never_change_the_pristine_databases(tau2_backend):
    """Copy-on-access tables: after write-heavy episodes, the shared pristine data hashes as on disk."""
    for domain, split in (("retail", "train"), ("airline", "base"), ("telecom", "train")):
        cache = tau2_backend.domain(domain)
        before = cache.pristine_hashes()
        for ref in tau2_backend.task_refs(domain, split)[:15]:
            script = tau2_backend.script(ref)
            play(tau2_backend, ref, Variant("gold", script.gold_actions), script.gold_outputs).reward(
                TerminationReason.USER_STOP
            )
        fresh = cache.constructor()
        on_disk = cache.mods["utils.utils"].get_dict_hash(fresh.tools.db.model_dump())
        assert cache.pristine_hashes() == before
        assert before[0] == on_disk


def test_concurrent_episodes_of_one_task_are_isolated(tau2_backend):
    """Two live episodes of the same task: one's writes are invisible to the other."""
    ref = next(r for r in tau2_backend.task_refs("retail", "train") if tau2_backend.script(r).gold_actions)
    script = tau2_backend.script(ref)
    done = play(tau2_backend, ref, Variant("gold", script.gold_actions), script.gold_outputs)
    idle = play(tau2_backend, ref, Variant("nothing", ()), script.gold_outputs)
    assert done.reward(TerminationReason.USER_STOP).breakdown["db_match"] is True
    assert idle.reward(TerminationReason.USER_STOP).breakdown["db_match"] is False
