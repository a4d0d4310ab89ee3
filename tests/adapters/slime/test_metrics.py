"""``metrics.py``: τ's pass^k, per-domain episode metrics, and slime's two log hooks.

The one fake here replaces slime's logging module (``slime.observability.logging_utils``, before 2026-08
``slime.utils.logging_utils``): :func:`install_fake_slime_log` registers it in ``sys.modules`` and records
every ``log(args, metrics, step_key=...)`` call. It is an external seam; nothing of ours is replaced.
"""

from __future__ import annotations

import itertools
import logging
import subprocess
import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest

from slime_tau_plugin.adapters.slime.metrics import (
    EVAL_PREFIX,
    ROLLOUT_PREFIX,
    episode_metrics,
    log_eval,
    log_rollout,
    rollout_step,
)
from slime_tau_plugin.engine.episode.result import SampleStatus
from slime_tau_plugin.reporting.summary import pass_hat_k
from tests.contracts.slime_sample import Sample

SLIME_LOG_MODULES = ("slime.observability.logging_utils", "slime.utils.logging_utils")


def install_fake_slime_log(monkeypatch: pytest.MonkeyPatch, module: str = SLIME_LOG_MODULES[0]) -> list[dict]:
    """Register a fake slime logging module at ``module``; returns the list its ``log`` appends to."""
    calls: list[dict[str, Any]] = []

    def log(args: Any, metrics: dict[str, Any], step_key: str) -> None:
        calls.append({"args": args, "metrics": dict(metrics), "step_key": step_key})

    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        mod = types.ModuleType(name)
        if i < len(parts):
            mod.__path__ = []  # a package, so the next part can be imported from it
        monkeypatch.setitem(sys.modules, name, mod)
        if i > 1:
            setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], mod)
    sys.modules[module].log = log
    return calls


def episode(
    task: str,
    reward: float,
    *,
    domain: str = "retail",
    status: Any = Sample.Status.COMPLETED,
    end: str = "user_stop",
    **meta: Any,
) -> Sample:
    metadata = {"benchmark": "tau2", "domain": domain, "task_id": task, "termination_reason": end, **meta}
    return Sample(reward=reward, status=status, metadata=metadata, response_length=10, loss_mask=[1] * 4 + [0] * 6)


def test_pass_hat_k_on_hand_made_tables():
    # tasks with 3/3, 1/3, 0/3 successes: C(c,k)/C(3,k) averaged over tasks
    assert pass_hat_k([3, 1, 0], 3, 1) == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert pass_hat_k([3, 1, 0], 3, 2) == pytest.approx((1 + 0 + 0) / 3)
    assert pass_hat_k([3, 1, 0], 3, 3) == pytest.approx(1 / 3)
    assert pass_hat_k([4, 3], 4, 2) == pytest.approx((1 + 3 / 6) / 2)
    # unequal trial counts: each task's own n
    assert pass_hat_k([2, 1], [2, 3], 1) == pytest.approx((1 + 1 / 3) / 2)
    assert pass_hat_k([2, 2], [2, 3], 2) == pytest.approx((1 + 1 / 3) / 2)


@pytest.mark.parametrize(
    ("successes", "trials", "k"),
    [([1], 2, 3), ([1], 2, 0), ([3], 2, 1), ([-1], 2, 1), ([], 2, 1), ([1, 1], [2], 1), ([2, 2], [2, 3], 3)],
)
def test_pass_hat_k_rejects_impossible_tables(successes, trials, k):
    with pytest.raises(ValueError):
        pass_hat_k(successes, trials, k)


def test_pass_hat_k_stays_in_unit_interval_and_falls_with_k():
    for n in range(1, 6):
        for table in itertools.product(range(n + 1), repeat=3):
            values = [pass_hat_k(list(table), n, k) for k in range(1, n + 1)]
            assert all(0.0 <= v <= 1.0 for v in values)
            assert values == sorted(values, reverse=True)
            assert values[0] == pytest.approx(sum(table) / (3 * n))  # pass^1 is the pass rate


def test_episode_metrics_per_domain_with_statuses_ends_times_and_tokens():
    timing = {"episode_wall_s": 2.0, "time_policy_s": 1.0, "time_env_s": 0.5, "time_user_s": 0.25}
    samples = [
        episode("0", 1.0, num_turns=4, tool_calls=3, tool_errors=1, parse_errors=0, **timing),
        episode(
            "1",
            0.0,
            status=Sample.Status.TRUNCATED,
            end="max_turns",
            num_turns=8,
            tool_calls=5,
            parse_errors=2,
            **timing,
        ),
        episode("2", 0.5, status="failed", end="env_error", template_fallbacks=1, **timing),  # a row: value string
        episode("3", 1.0, status=SampleStatus.ABORTED, end="aborted", num_turns=3, **timing),
        episode("0", 1.0, domain="airline", num_turns=2),
    ]
    m = episode_metrics(samples, ROLLOUT_PREFIX)
    r = {
        k.removeprefix("rollout/tau/tau2/retail/"): v for k, v in m.items() if k.startswith("rollout/tau/tau2/retail/")
    }
    assert r["samples"] == 4
    assert r["reward_mean"] == pytest.approx(2.5 / 4)
    assert r["pass_rate"] == 0.5
    assert r["turns_mean"] == pytest.approx(15 / 4)
    assert r["tool_calls_per_episode"] == 2 and r["tool_errors_per_episode"] == 0.25
    assert r["parse_errors_per_episode"] == 0.5 and r["template_fallbacks_per_episode"] == 0.25
    assert {k: v for k, v in r.items() if k.startswith("status/")} == {
        "status/completed": 0.25,
        "status/truncated": 0.25,
        "status/aborted": 0.25,
        "status/failed": 0.25,
    }
    assert r["termination/user_stop"] == 0.25 and r["termination/max_turns"] == 0.25
    assert r["termination/env_error"] == 0.25 and r["termination/aborted"] == 0.25
    assert r["termination/agent_stop"] == 0.0  # every reason is logged, so curves never have gaps
    assert r["time/policy_share"] == 0.5 and r["time/env_share"] == 0.25 and r["time/user_share"] == 0.125
    assert r["time/other_share"] == 0.125 and r["time/episode_wall_s_mean"] == 2.0
    assert r["tokens/response_mean"] == 10 and r["tokens/trainable_mean"] == 4 and r["tokens/trainable_fraction"] == 0.4
    assert "pass^1" not in r  # only eval sets get pass^k
    assert m["rollout/tau/tau2/airline/samples"] == 1 and "rollout/tau/tau2/airline/time/policy_share" not in m


def test_samples_without_our_metadata_are_skipped_and_defaults_name_the_domain():
    foreign = [Sample(reward=1.0), Sample(reward=1.0, metadata={"task_id": "0"}), Sample(metadata=None)]
    bare = Sample(reward=1.0, metadata={"termination_reason": "user_stop", "num_turns": 2})
    assert episode_metrics(foreign, ROLLOUT_PREFIX) == {}
    m = episode_metrics([*foreign, bare], ROLLOUT_PREFIX, with_pass_k=True, default_domain="tau1/airline")
    assert m["rollout/tau/tau1/airline/samples"] == 1
    assert m["rollout/tau/tau1/airline/pass^1"] == 1.0  # told apart by prompt when there is no task id


def test_eval_pass_k_on_mixed_successes_uses_the_smallest_trial_count(caplog):
    rewards = {"a": [1, 1, 1], "b": [1, 0, 0], "c": [0, 0, 0]}
    samples = [episode(t, float(r)) for t, rs in rewards.items() for r in rs]
    m = episode_metrics(samples, "eval/tau/x/", with_pass_k=True)
    p = "eval/tau/x/tau2/retail/"
    assert m[p + "pass^1"] == pytest.approx(4 / 9)
    assert m[p + "pass^2"] == pytest.approx(1 / 3)
    assert m[p + "pass^3"] == pytest.approx(1 / 3)
    assert m[p + "tasks"] == 3 and m[p + "trials_per_task"] == 3
    with caplog.at_level(logging.WARNING, logger="slime_tau_plugin.adapters.slime.metrics"):
        m = episode_metrics([*samples, episode("a", 1.0)], "eval/tau/x/", with_pass_k=True)
    assert "pass^4" not in {k.removeprefix(p) for k in m} and m[p + "trials_per_task"] == 3
    assert m[p + "pass^3"] == pytest.approx((1 + 0 + 0) / 3)  # task a: C(4,3)/C(4,3)
    assert "3 to 4 samples" in caplog.text


def test_eval_pass_k_carries_its_seeded_95_interval_over_tasks():
    samples = [episode(str(t), float(t % 3 != 0)) for t in range(30) for _ in range(2)]
    p = "eval/tau/x/tau2/retail/"
    m = episode_metrics(samples, "eval/tau/x/", with_pass_k=True)
    assert m[p + "pass^1"] == pytest.approx(2 / 3)
    assert m[p + "pass^1/ci95_low"] < m[p + "pass^1"] < m[p + "pass^1/ci95_high"]
    assert 0.1 < m[p + "pass^1/ci95_high"] - m[p + "pass^1/ci95_low"] < 0.5  # 30 tasks: about ±0.17
    assert m == episode_metrics(samples, "eval/tau/x/", with_pass_k=True), "seeded: the same run, the same interval"
    assert p + "pass^1/ci95_low" not in episode_metrics(samples, "eval/tau/x/")  # training rollouts: no pass^k


@pytest.mark.parametrize("module", SLIME_LOG_MODULES)
def test_hooks_log_through_slime_with_its_step_keys_and_keep_slime_logging(monkeypatch, module):
    calls = install_fake_slime_log(monkeypatch, module)
    args = SimpleNamespace(use_wandb=True, tau_benchmark="tau2", tau_domain="retail")
    samples = [episode("0", 1.0), episode("0", 0.0), episode("1", 1.0), episode("1", 1.0)]
    assert log_rollout(3, args, [samples[:2], samples[2:]], {"x": 1}, 12.5) is False
    data = {"retail_test": {"rewards": [s.reward for s in samples], "truncated": [False] * 4, "samples": samples}}
    assert log_eval(3, args, data, None) is False
    (rollout, evaluation) = calls
    assert rollout["step_key"] == "rollout/step" and rollout["metrics"]["rollout/step"] == 3
    assert rollout["args"] is args
    partial = {k for k in rollout["metrics"] if k.startswith("rollout/tau/partial/")}  # slime's partial rollout
    assert (
        rollout["metrics"]["rollout/tau/partial/resumed"] == 0.0 and "rollout/tau/partial/aborted_suspended" in partial
    )
    others = set(rollout["metrics"]) - partial - {"rollout/step"}
    assert all(k.startswith("rollout/tau/tau2/retail/") for k in others)
    assert rollout["metrics"]["rollout/tau/tau2/retail/samples"] == 4  # groups were flattened
    assert evaluation["step_key"] == "eval/step" and evaluation["metrics"]["eval/step"] == 3
    assert evaluation["metrics"]["eval/tau/retail_test/tau2/retail/pass^1"] == 0.75
    assert evaluation["metrics"]["eval/tau/retail_test/tau2/retail/pass^2"] == 0.5
    assert all(k.startswith(EVAL_PREFIX + "retail_test/") for k in evaluation["metrics"] if k != "eval/step")


def test_step_follows_slimes_train_step_option(monkeypatch):
    calls = install_fake_slime_log(monkeypatch)
    args = SimpleNamespace(wandb_always_use_train_step=True, rollout_batch_size=32, n_samples_per_prompt=8)
    args.global_batch_size = 128
    assert rollout_step(args, 5) == 5 * 32 * 8 // 128 == 10
    assert rollout_step(SimpleNamespace(), 5) == 5
    log_rollout(5, args, [episode("0", 1.0)], None, 1.0)
    assert calls[0]["metrics"]["rollout/step"] == 10


def test_without_slime_the_metrics_go_to_the_module_logger(monkeypatch, caplog):
    for name in ("slime", *SLIME_LOG_MODULES):
        monkeypatch.setitem(sys.modules, name, None)  # import of these raises ImportError
    with caplog.at_level(logging.INFO, logger="slime_tau_plugin.adapters.slime.metrics"):
        assert log_rollout(1, SimpleNamespace(), [episode("0", 1.0)], None, 1.0) is False
    assert "rollout/tau/tau2/retail/pass_rate" in caplog.text and "'rollout/step': 1" in caplog.text


def test_nothing_is_logged_when_no_sample_is_ours(monkeypatch):
    calls = install_fake_slime_log(monkeypatch)
    assert log_rollout(0, SimpleNamespace(), [Sample(reward=1.0)], None, 1.0) is False
    assert log_eval(0, SimpleNamespace(), {"other": {"rewards": [], "truncated": [], "samples": []}}, None) is False
    assert calls == []


def test_importing_metrics_imports_no_slime():
    loaded = "[m for m in sys.modules if m.split('.')[0] == 'slime']"
    code = f"import sys, slime_tau_plugin.adapters.slime.metrics; print({loaded})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_episode_metrics_carry_the_reward_breakdown_means():
    def info(score: float) -> dict[str, Any]:
        return {"partial_score": score, "partial_scores": {"DB": float(score == 1.0), "ACTION": score}}

    samples = [
        episode("0", 1.0, reward_info=info(1.0)),
        episode("1", 0.0, reward_info=info(0.5)),
        episode("2", 0.0, domain="airline", status=Sample.Status.FAILED, end="user_error"),
    ]
    metrics = episode_metrics(samples, ROLLOUT_PREFIX)
    retail = f"{ROLLOUT_PREFIX}tau2/retail/"
    assert metrics[retail + "partial_score_mean"] == pytest.approx(0.75)
    assert metrics[retail + "partial/DB_mean"] == pytest.approx(0.5)
    assert metrics[retail + "partial/ACTION_mean"] == pytest.approx(0.75)
    assert f"{ROLLOUT_PREFIX}tau2/airline/partial_score_mean" not in metrics  # a FAILED episode was never scored
