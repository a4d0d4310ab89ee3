"""The partial scores in ``reward_info`` on real τ² (and, when installed, τ-bench v1) episodes.

A gold episode scores every part 1.0; dropping one gold action leaves the action fraction at
(n-1)/n; doing nothing scores 0 on the database of a task that writes. Fast and reference rewards give
the same partial scores (they are computed from the same checks). ``reward_breakdown_metrics`` turns the
samples' ``reward_info`` into per-domain means.
"""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.envs import EnvToolCall, TaskRef
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.reporting.reward_breakdown import reward_breakdown_metrics

STOP = TerminationReason.USER_STOP


def _play(backend, ref: TaskRef, actions, say_outputs: bool = True):
    session = backend.open(ref)
    session.record_message("user", session.script.user_instructions)
    for i, action in enumerate(actions):
        call = EnvToolCall(action.name, dict(action.arguments), f"call-{i}")
        (session.user_step if action.requestor == "user" else session.step)(call)
        session.record_message("assistant", "Done with that step.")
    if say_outputs and session.script.gold_outputs:
        session.record_message("assistant", "Here is what I found: " + "; ".join(session.script.gold_outputs))
    return session


def _writing_task(backend, domain: str, split: str) -> TaskRef:
    """A task whose gold solution has at least three agent actions and changes the database."""
    for ref in backend.task_refs(domain, split):
        gold = backend.script(ref).gold_actions
        if len(gold) >= 3 and all(a.requestor == "assistant" for a in gold):
            if _play(backend, ref, ()).reward(STOP).breakdown["db_match"] is False:
                return ref
    raise AssertionError(f"no writing task in {domain}/{split}")


@pytest.mark.parametrize(("domain", "split"), [("retail", "train"), ("airline", "base")])
def test_tau2_gold_missing_action_and_nothing_done(tau2_backend, domain: str, split: str) -> None:
    ref = _writing_task(tau2_backend, domain, split)
    gold = tau2_backend.script(ref).gold_actions

    session = _play(tau2_backend, ref, gold)
    for result in (session.reward(STOP), session.reference_reward(STOP)):
        assert result.reward == 1.0
        assert result.breakdown["partial_score"] == 1.0
        assert set(result.breakdown["partial_scores"]) >= {"DB", "ACTION"}
        assert all(v == 1.0 for v in result.breakdown["partial_scores"].values())

    missing = _play(tau2_backend, ref, gold[:-1])
    fast, reference = missing.reward(STOP), missing.reference_reward(STOP)
    assert fast.reward == 0.0
    assert fast.breakdown["partial_scores"]["ACTION"] == pytest.approx((len(gold) - 1) / len(gold))
    assert fast.breakdown["partial_scores"]["DB"] == 0.0
    assert 0.0 < fast.breakdown["partial_score"] < 1.0
    assert fast.breakdown["partial_scores"] == reference.breakdown["partial_scores"]
    assert fast.breakdown["partial_score"] == reference.breakdown["partial_score"]

    nothing = _play(tau2_backend, ref, (), say_outputs=False).reward(STOP)
    assert nothing.breakdown["partial_scores"]["DB"] == nothing.breakdown["partial_scores"]["ACTION"] == 0.0
    assert nothing.breakdown["partial_score"] == pytest.approx(
        sum(nothing.breakdown["partial_scores"].values()) / len(nothing.breakdown["partial_scores"])
    )
    assert nothing.breakdown["partial_score"] < fast.breakdown["partial_score"]


def test_tau2_unscored_end_has_partial_score_zero(tau2_backend) -> None:
    ref = _writing_task(tau2_backend, "retail", "train")
    session = _play(tau2_backend, ref, tau2_backend.script(ref).gold_actions)
    for result in (session.reward(TerminationReason.MAX_TURNS), session.reference_reward(TerminationReason.MAX_TURNS)):
        assert result.reward == 0.0
        assert result.breakdown["partial_score"] == 0.0 and result.breakdown["partial_scores"] == {}


def test_tau2_telecom_scores_env_assertions_as_a_fraction(tau2_backend) -> None:
    refs = tau2_backend.task_refs("telecom", "train")
    ref = next(r for r in refs if tau2_backend.script(r).gold_actions)
    gold = tau2_backend.script(ref).gold_actions
    done = _play(tau2_backend, ref, gold).reward(STOP)
    assert done.reward == 1.0 and done.breakdown["partial_score"] == 1.0
    assert "ENV_ASSERTION" in done.breakdown["partial_scores"]
    idle = _play(tau2_backend, ref, ()).reward(STOP)
    assert idle.reward == 0.0 and 0.0 <= idle.breakdown["partial_score"] < 1.0


def test_tau1_gold_missing_action_and_nothing_done() -> None:
    pytest.importorskip("tau_bench")
    from slime_tau_plugin.engine.envs import get_backend

    backend = get_backend("tau1")
    ref = _writing_task(backend, "retail", "test")
    gold = backend.script(ref).gold_actions
    calls = [a for a in gold if a.name != "respond"]

    full = _play(backend, ref, gold).reward(STOP)
    assert full.reward == 1.0 and full.breakdown["partial_score"] == 1.0
    assert all(v == 1.0 for v in full.breakdown["partial_scores"].values())

    missing = _play(backend, ref, gold[:-1])
    fast, reference = missing.reward(STOP), missing.reference_reward(STOP)
    assert fast.reward == 0.0
    assert fast.breakdown["partial_scores"]["ACTION"] == pytest.approx((len(calls) - 1) / len(calls))
    assert fast.breakdown["partial_scores"] == reference.breakdown["partial_scores"]
    assert 0.0 < fast.breakdown["partial_score"] < 1.0

    nothing = _play(backend, ref, (), say_outputs=False).reward(STOP)
    assert nothing.breakdown["partial_scores"]["DB"] == nothing.breakdown["partial_scores"]["ACTION"] == 0.0
    assert nothing.breakdown["partial_score"] == 0.0
    unscored = _play(backend, ref, gold).reward(TerminationReason.MAX_TURNS)
    assert unscored.breakdown["partial_score"] == 0.0


def test_breakdown_metrics_are_per_domain_means(tau2_backend) -> None:
    ref = _writing_task(tau2_backend, "retail", "train")
    gold = tau2_backend.script(ref).gold_actions
    infos = [_play(tau2_backend, ref, actions).reward(STOP).breakdown for actions in (gold, gold[:-1], ())]
    samples = [{"metadata": {"benchmark": "tau2", "domain": "retail", "reward_info": info}} for info in infos]
    samples.append({"metadata": {"benchmark": "tau2", "domain": "retail", "error": "user simulator down"}})
    metrics = reward_breakdown_metrics([samples[:2], samples[2:]], prefix="rollout/tau/")
    prefix = "rollout/tau/tau2/retail/"
    assert metrics[prefix + "partial_score_mean"] == pytest.approx(sum(i["partial_score"] for i in infos) / 3)
    assert metrics[prefix + "partial/DB_mean"] == pytest.approx(1 / 3)
    want_action = sum(i["partial_scores"]["ACTION"] for i in infos) / 3
    assert metrics[prefix + "partial/ACTION_mean"] == pytest.approx(want_action)
    assert metrics[prefix + "partial_score_count"] == 3
