"""``slime-tau soak`` as people run it: real server processes, real faults, a real outage, exit codes.

Each soak starts the oracle policy and the scripted user in their own processes and drives ``generate``
with a strict ``Sample``; the JSON report is what the assertions read. Kept small (tens of episodes):
the long runs and their numbers are in ``benchmarks/soak.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLI = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "soak"]
TOKENIZER = ROOT / ".cache" / "tokenizers" / "qwen2_5"


def soak(tmp_path: Path, *flags: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "soak.json"
    done = subprocess.run(
        [*CLI, "--tokenizer", str(TOKENIZER), "--json", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    report = json.loads(out.read_text()) if out.exists() else {}
    return done, report


@pytest.fixture(autouse=True)
def _needs_tokenizer():
    if not (TOKENIZER / "tokenizer_config.json").is_file():
        pytest.skip("the Qwen2.5 tokenizer is not fetched (scripts/fetch_test_tokenizers.sh)")


def test_a_faulty_soak_loses_nothing_and_counts_its_faults(tmp_path):
    done, report = soak(
        tmp_path,
        *("--episodes", "40", "--concurrency", "16", "--fault-rate", "0.05", "--seed", "7"),
        *("--request-timeout-s", "3"),  # slow and env_hang faults cost 3-5 s, not 15-17
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert report["episodes"] == 40
    assert (report["exceptions_escaped"], report["misaligned"], report["lost"]) == (0, 0, 0)
    assert report["faults_injected_total"] > 0, report["faults_injected"]
    assert sum(report["statuses"].values()) == 40
    assert "PENDING" not in report["statuses"]
    for line in ("exceptions escaped  0", "misaligned samples  0", "samples lost        0", "PASS"):
        assert line in done.stdout


def test_a_user_outage_shorter_than_the_tolerance_costs_time_not_samples(tmp_path):
    done, report = soak(
        tmp_path,
        *("--episodes", "64", "--concurrency", "16", "--fault-rate", "0"),
        *("--user-latency-ms", "250", "--max-replies", "4"),  # an episode talks for > 1.5 s: the outage hits many
        *("--outage", "user:3s@2s", "--outage-tolerance-s", "30"),
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert report["lost"] == 0 and report["exceptions_escaped"] == 0
    assert len(report["outages"]) == 1 and "answering again" in report["outages"][0], report["outages"]
    assert report["statuses"] == {"COMPLETED": 64}, report["failed_errors"]
    assert report["outage_wait_s"] > 0  # episodes waited the outage out, and said so
    assert report["breaker_openings"] == {}


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--outage", "user:30s"], "expected TARGET:DURATION@AT"),
        (["--outage", "judge:3s@1s"], "target 'judge'"),
        (["--outage", "user:soon@1s"], "not a duration"),
        (["--kinds", "reset,no_such_kind"], "kind 'no_such_kind'"),
        (["--kinds", "reset:0.5"], "--fault-rate sets the rate"),
        (["--fault-rate", "1.5"], "expected a share"),
    ],
    ids=["outage-without-at", "outage-unknown-target", "outage-bad-duration", "unknown-kind", "kind-with-rate", "rate"],
)
def test_a_bad_flag_is_one_line_and_exit_2(tmp_path, flags, needle):
    done, _ = soak(tmp_path, "--episodes", "1", *flags, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("[transformers]")]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("slime-tau soak: error:"), done.stderr
    assert needle in lines[0], lines[0]
