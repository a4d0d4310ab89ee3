"""slime's log hooks fed with real episodes: ``slime-tau rollout`` samples through ``log_rollout``/``log_eval``.

The CLI (a subprocess, built-in oracle policy, scripted user, real τ² retail) writes ``samples.jsonl``; its
rows become the slime ``Sample`` stand-in and go through both hooks, with slime's logging module replaced
by the fake of ``tests/adapters/slime/test_metrics.py`` (an external seam).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.metrics import log_eval, log_rollout
from tests.adapters.slime.test_metrics import install_fake_slime_log
from tests.contracts.slime_sample import Sample

TASKS, TRIALS = 4, 2
ROW_FIELDS = ("prompt", "metadata", "session_id", "tokens", "response", "response_length", "loss_mask", "reward")


@pytest.fixture(scope="module")
def run_dir(qwen3_dir, tmp_path_factory) -> Path:
    if importlib.util.find_spec("tau2") is None:
        pytest.skip("τ² is not installed")
    out = tmp_path_factory.mktemp("metrics_run")
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "rollout", "--tokenizer", qwen3_dir, "--tasks", "0-3"]
    cmd += ["--samples-per-task", str(TRIALS), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def load_samples(run_dir: Path, *, status_as_enum: bool = True) -> list[Sample]:
    samples = []
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        row = json.loads(line)
        sample = Sample(**{name: row[name] for name in ROW_FIELDS})
        sample.rollout_log_probs, sample.remove_sample = row["rollout_log_probs"], row["remove_sample"]
        sample.status = Sample.Status(row["status"]) if status_as_enum else row["status"]
        samples.append(sample)
    return samples


def test_rollout_hook_matches_the_cli_summary(run_dir, monkeypatch):
    calls = install_fake_slime_log(monkeypatch)
    samples = load_samples(run_dir)
    assert log_rollout(7, SimpleNamespace(), samples, {}, 3.0) is False
    (call,) = calls
    assert call["step_key"] == "rollout/step" and call["metrics"]["rollout/step"] == 7
    m = {k.removeprefix("rollout/tau/tau2/retail/"): v for k, v in call["metrics"].items()}
    summary = json.loads((run_dir / "summary.json").read_text())["domains"]["tau2/retail"]
    n = TASKS * TRIALS
    assert m["samples"] == n and m["reward_mean"] == 1.0 and m["pass_rate"] == 1.0
    assert m["turns_mean"] == pytest.approx(summary["turns_mean"])
    assert m["tool_calls_per_episode"] == pytest.approx(summary["tool_calls_per_episode"])
    assert m["tool_errors_per_episode"] == pytest.approx(summary["tool_errors_per_episode"])
    assert m["parse_errors_per_episode"] == 0.0
    assert m["tokens/trainable_mean"] == pytest.approx(summary["tokens/trainable_mean"])
    assert m["tokens/response_mean"] == pytest.approx(summary["tokens/response_mean"])
    shared = {"samples", "reward_mean", "pass_rate", "turns_mean", "status/completed", "nl_assertions_excluded_rate"}
    assert all(m[k] == pytest.approx(summary[k]) for k in shared), "one per-domain summary, one set of key names"
    assert m["status/completed"] == 1.0 and m["status/truncated"] == m["status/failed"] == m["status/aborted"] == 0.0
    assert m["termination/user_stop"] == 1.0
    shares = [m["time/policy_share"], m["time/env_share"], m["time/user_share"], m["time/other_share"]]
    assert all(0.0 <= s <= 1.0 for s in shares) and sum(shares) == pytest.approx(1.0)
    assert m["time/policy_share"] > 0 and m["time/user_share"] >= 0


def test_eval_hook_gives_pass_k_of_the_oracle_and_of_a_mixed_set(run_dir, monkeypatch):
    calls = install_fake_slime_log(monkeypatch)
    oracle = load_samples(run_dir, status_as_enum=False)  # rows carry status as its value string
    mixed = load_samples(run_dir)
    failed = next(s for s in mixed if s.metadata["task_id"] == mixed[0].metadata["task_id"])
    failed.reward, failed.status = 0.0, Sample.Status.TRUNCATED
    data = {
        name: {"rewards": [s.reward for s in group], "truncated": [False] * len(group), "samples": group}
        for name, group in (("oracle", oracle), ("mixed", mixed))
    }
    assert log_eval(2, SimpleNamespace(), data, None) is False
    (call,) = calls
    assert call["step_key"] == "eval/step" and call["metrics"]["eval/step"] == 2
    m = call["metrics"]
    assert m["eval/tau/oracle/tau2/retail/pass^1"] == 1.0 and m["eval/tau/oracle/tau2/retail/pass^2"] == 1.0
    assert (
        m["eval/tau/oracle/tau2/retail/tasks"] == TASKS and m["eval/tau/oracle/tau2/retail/trials_per_task"] == TRIALS
    )
    assert m["eval/tau/oracle/tau2/retail/status/completed"] == 1.0
    # one of task 0's two trials failed: pass^1 = (1/2 + 1 + 1 + 1) / 4, pass^2 = (0 + 1 + 1 + 1) / 4
    assert m["eval/tau/mixed/tau2/retail/pass^1"] == pytest.approx(7 / 8)
    assert m["eval/tau/mixed/tau2/retail/pass^2"] == pytest.approx(3 / 4)
    assert m["eval/tau/mixed/tau2/retail/status/truncated"] == pytest.approx(1 / 8)
    assert "eval/tau/oracle/tau2/retail/pass^3" not in m
