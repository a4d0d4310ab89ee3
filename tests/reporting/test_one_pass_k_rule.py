"""One pass^k rule: the same samples (some FAILED, one past its deadline) give slime's eval log and the CLI summary
the same pass^k, with the episodes left out counted beside it (``reporting/summary.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from slime_tau_plugin.adapters.slime.metrics import eval_clock, log_eval
from slime_tau_plugin.reporting.summary import left_out
from slime_tau_plugin.tools.cli.play.runner import RolloutSample, summarize
from tests.adapters.slime.test_metrics import install_fake_slime_log
from tests.contracts.slime_sample import Sample

# task -> (reward, status, termination reason) of each trial
TRIALS: dict[str, list[tuple[float, str, str]]] = {
    "a": [(1.0, "COMPLETED", "user_stop"), (1.0, "COMPLETED", "user_stop"), (0.0, "FAILED", "policy_error")],
    "b": [(1.0, "COMPLETED", "user_stop"), (0.0, "COMPLETED", "user_stop"), (0.0, "TRUNCATED", "deadline")],
    "c": [(0.0, "COMPLETED", "max_turns"), (0.0, "FAILED", "user_error"), (1.0, "COMPLETED", "agent_stop")],
    "d": [(0.0, "COMPLETED", "user_stop"), (1.0, "COMPLETED", "user_stop"), (1.0, "COMPLETED", "user_stop")],
}


def _meta(task: str, end: str) -> dict[str, Any]:
    return {"benchmark": "tau2", "domain": "retail", "task_id": task, "termination_reason": end}


def _slime_samples() -> list[Sample]:
    return [
        Sample(reward=r, status=Sample.Status[s], metadata=_meta(t, e), response_length=4, loss_mask=[1] * 4)
        for t, trials in TRIALS.items()
        for r, s, e in trials
    ]


def _cli_samples() -> list[RolloutSample]:
    return [
        RolloutSample(reward=r, status=RolloutSample.Status[s], metadata=_meta(t, e), response_length=4)
        for t, trials in TRIALS.items()
        for r, s, e in trials
    ]


def test_slimes_eval_log_and_the_cli_summary_give_one_pass_k(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = install_fake_slime_log(monkeypatch)
    eval_clock().take()  # no eval of an earlier test is still open
    eval_clock().started()
    log_eval(3, SimpleNamespace(), {"tau2-retail": {"samples": _slime_samples()}}, None)
    logged = calls[0]["metrics"]
    prefix = "eval/tau/tau2-retail/tau2/retail/"
    slime = {k.removeprefix(prefix): v for k, v in logged.items() if k.startswith(prefix + "pass^")}
    cli = summarize(_cli_samples())["domains"]["tau2/retail"]

    # the evidence: a, b and c keep 2 trials each (one FAILED or past its deadline), d keeps 3: k up to 2
    assert slime["pass^1"] == pytest.approx((2 / 2 + 1 / 2 + 1 / 2 + 2 / 3) / 4)
    assert slime["pass^2"] == pytest.approx((1 + 0 + 0 + 1 / 3) / 4)
    assert "pass^3" not in slime
    assert {k: v for k, v in cli.items() if k.startswith("pass^")} == pytest.approx(slime)
    assert logged[prefix + "left_out"] == cli["left_out"] == 3
    assert logged[prefix + "trials_per_task"] == 2 and cli["trials_per_task"] == [2, 3]
    assert logged["eval/tau/wall_s"] >= 0.0  # the eval's wall time, from its first episode to the log


def test_what_is_left_out_is_failed_or_past_a_run_limit() -> None:
    kept = [s for s in _cli_samples() if not left_out(s)]
    assert len(kept) == 9
    assert all(s.status is RolloutSample.Status.COMPLETED for s in kept)
    assert [left_out(s) for s in _slime_samples()] == [left_out(s) for s in _cli_samples()]
