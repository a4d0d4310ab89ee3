"""``CustomerCost``: what a sample stores reads back the same, a resumed episode adds its earlier legs, and every
share of wall time stays in [0, 1], per episode and pooled over a step (``tau_user/cost_*``)."""

from __future__ import annotations

from slime_tau_plugin.engine.episode.cost import COST_KEY, ChatCost, CustomerCost
from slime_tau_plugin.reporting.customer_cost import cost_metrics


def test_metadata_round_trips_and_a_resume_adds_the_earlier_legs():
    earlier = CustomerCost(ChatCost(3, 1, 900, 12, 0.6), ChatCost(), 0.0004, 2.0)
    later = CustomerCost(ChatCost(2, 0, 700, 8, 0.4), ChatCost(1, 0, 650, 30, 0.5), 0.0006, 5.0)
    total = later.plus(earlier)
    assert CustomerCost.from_metadata(total.as_metadata()) == total
    assert total.user == ChatCost(5, 1, 1600, 20, 1.0) and total.judge.requests == 1
    assert total.wall_s == 5.0, "the later leg's wall time already counts the earlier legs"
    assert total.user_wait_share == 0.2 and total.judge_wait_share == 0.1
    assert CustomerCost.from_metadata(None) == CustomerCost() == CustomerCost.from_metadata({"user": "garbled"})


def test_shares_stay_in_zero_to_one():
    assert CustomerCost(ChatCost(wait_s=3.0), wall_s=2.0).user_wait_share == 1.0  # overlapping waits, capped
    assert CustomerCost(ChatCost(wait_s=1.0)).user_wait_share == 0.0  # no wall time: no share
    metas = [
        {COST_KEY: CustomerCost(ChatCost(4, 1, 100, 5, 1.0), ChatCost(1, 0, 50, 5, 9.0), 0.001, 4.0).as_metadata()},
        {COST_KEY: CustomerCost(ChatCost(2, 0, 60, 3, 1.0), wall_s=1.0).as_metadata()},
        {"termination_reason": "user_stop"},  # a row written before the cost existed: not counted
    ]
    m = cost_metrics(metas)
    assert m["tau_user/cost_requests_per_episode"] == 3.0 and m["tau_user/cost_failed_requests_per_episode"] == 0.5
    assert m["tau_user/cost_wait_share"] == 2.0 / 5.0, "pooled: the step's waits over its wall time"
    assert m["tau_user/cost_judge_wait_share"] == 1.0 and m["tau_user/cost_judge_tokens_per_episode"] == 27.5
    assert m["tau_user/cost_review_cpu_ms_per_episode"] == 0.5
    assert cost_metrics([{"termination_reason": "user_stop"}]) == {}
