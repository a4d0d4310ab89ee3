"""TRL's and verl's step numbers come from one piece (``reporting/step_views.py``) and log what they logged before.

``step_metrics_golden.json`` holds both adapters' numbers over the batch below as their own twin functions computed
them before the merge (recorded from that code): every key and value must stay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slime_tau_plugin.adapters.trl import episodes as trl
from slime_tau_plugin.adapters.verl import episodes as verl
from slime_tau_plugin.engine.episode.result import SampleStatus
from slime_tau_plugin.reporting.step_views import EpisodeView

GOLDEN = Path(__file__).with_name("step_metrics_golden.json")


def verl_extras() -> list[dict[str, Any]]:
    """Four of ``TauAgentLoop``'s rows over two domains (a pass, a customer error, a miss, a policy failure) and a row
    another loop filled."""
    user = {"requests": 3, "failed_requests": 0, "prompt_tokens": 100, "completion_tokens": 20, "wait_s": 1.0}
    judge = dict.fromkeys(user, 0)
    base = {
        "tau_task": "tau2/retail/train/7", "status": "completed", "termination_reason": "user_stop", "model_turns": 3,
        "tool_call_counts": 2, "tool_errors": 1, "parse_errors": 0, "template_fallbacks": 0, "user_tool_errors": 0,
        "tau_reward": 1.0, "error": None, "failed_endpoint": None,
        "tau_review": {"excluded": False, "severity": "none", "findings": []},
        "tau_user_cost": {"user": user, "judge": judge, "review_cpu_s": 0.01, "wall_s": 4.0,
                          "user_wait_share": 0.25, "judge_wait_share": 0.0},
        "tau_user_share": {"user_cache_hits": 1, "user_cache_misses": 2, "user_opening_asked": 1,
                           "user_opening_shared": 1},
    }  # fmt: skip
    finding = {"check": "repeated_message", "severity": "critical_hindered", "tag": "x"}
    review = {"excluded": True, "severity": "critical_hindered", "findings": [finding]}
    lost = base | {"status": "failed", "termination_reason": "user_error", "tau_reward": 0.0}
    lost |= {"failed_endpoint": "customer", "tau_review": review}
    other = base | {"tau_task": "tau1/airline/test/2", "tau_reward": 0.0}
    policy = base | {"tau_task": "tau1/airline/test/3", "status": "failed", "termination_reason": "failed"}
    policy |= {"tau_reward": 0.0, "failed_endpoint": "policy"}
    return [base, lost, other, policy, {"unrelated": 1}]


def trl_views(views: list[EpisodeView]) -> list[EpisodeView]:
    """The same rows as TRL's ``episode_view`` names them (slime's metadata), two rows a group."""
    out = []
    for i, view in enumerate(views):
        meta = dict(view.metadata, num_turns=view.metadata["model_turns"], tool_calls=view.metadata["tool_call_counts"])
        meta |= meta.pop("tau_user_share")
        failed = view.status is SampleStatus.FAILED
        out.append(EpisodeView(view.status, meta, view.reward, 3, [1, 1, 0], failed, group=i // 2))
    return out


def test_trl_and_verl_log_every_key_and_value_they_logged_before_the_merge():
    golden = json.loads(GOLDEN.read_text())
    extras = verl_extras()
    views = verl.episode_views(extras, [[1, 1, 0]] * len(extras))
    assert len(views) == 4 and all(isinstance(v, EpisodeView) for v in views)
    assert verl.step_metrics(views) == golden["verl"]
    assert trl.step_metrics(trl_views(views)) == golden["trl"]
    assert len(golden["verl"]) > 100 and len(golden["trl"]) > 100
    assert golden["verl"]["tau/failed/share"] == 0.5 and golden["trl"]["tau/failed/customer"] == 0.25


def test_no_rows_no_numbers():
    assert verl.step_metrics([]) == {} and trl.step_metrics([]) == {}
