"""``slime-tau export``: a finished run written as a τ² leaderboard submission that upstream τ²'s own checker
(``tau2 submit validate``: format, every base task, trial counts, pass^k against its own ``compute_metrics``)
accepts, and runs the leaderboard would not take refused in one line each (exit 2).

The run: τ² airline's 50 base tasks, one trial each, the built-in oracle as the agent and our scripted customer
behind an OpenAI-compatible endpoint (``ChatUserServer``) as the "LLM" user simulator, NL assertions excluded (no
judge here). Needs upstream τ³ and ``TAU2_DATA_DIR`` (``test_tau3_domains.py``) with airline's data; skips elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.envs.tau3.test_tau3_domains import _data, pytestmark  # noqa: F401 (the same skip)

AIRLINE_DB = _data / "tau2" / "domains" / "airline" / "db.json"
needs_airline = pytest.mark.skipif(not AIRLINE_DB.is_file(), reason=f"needs {AIRLINE_DB}")


def cli(*argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "slime_tau_plugin.tools.cli", *argv], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def user_url():
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    server = ChatUserServer().start()
    yield server.base_url
    server.stop()


@pytest.fixture(scope="module")
def llm_user_run(user_url, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "airline"
    done = cli(
        *("rollout", "--domain", "airline", "--split", "base", "--nl-assertions", "exclude", "--out", str(out)),
        *("--user", "llm", "--user-base-url", user_url, "--user-model", "scripted-user"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def refusal(*argv: str) -> str:
    done = cli("export", *argv)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-2000:]
    return lines[0]


@needs_airline
def test_an_exported_run_is_accepted_by_upstream_tau2s_checker(llm_user_run, tmp_path):
    out = tmp_path / "submission"
    done = cli("export", str(llm_user_run), "--out", str(out), "--model-organization", "Acme")
    assert done.returncode == 2 and "1 trial(s) per task; the leaderboard asks at least 4" in done.stderr
    done = cli("export", str(llm_user_run), "--out", str(out), "--model-organization", "Acme", "--min-trials", "1")
    assert done.returncode == 2 and "pass --model-name NAME" in done.stderr, done.stderr[-2000:]
    argv = [str(llm_user_run), "--out", str(out), "--model-organization", "Acme", "--min-trials", "1"]
    done = cli("export", *argv, "--model-name", "oracle")
    assert done.returncode == 0, done.stderr[-3000:]
    submission = json.loads((out / "submission.json").read_text())
    assert submission["results"]["airline"]["pass_1"] == 100.0  # the oracle solves every airline task
    assert submission["methodology"]["user_simulator"] == "scripted-user"
    assert submission["submission_type"] == "custom" and submission["trajectory_files"] == {
        "airline": "airline_results.json"
    }
    tau2 = shutil.which("tau2", path=str(Path(sys.executable).parent))
    assert tau2, "upstream τ²'s CLI (tau2) is not installed next to this Python"
    checked = subprocess.run([tau2, "submit", "validate", str(out)], capture_output=True, text=True, timeout=600)
    said = checked.stdout
    assert "All files passed all checks!" in said and "Submission validation successful!" in said, said[-3000:]
    assert "Submission metrics validation successful!" in said and "❌" not in said, said[-3000:]


@needs_airline
def test_runs_the_leaderboard_would_not_take_are_refused_in_one_line(llm_user_run, user_url, tmp_path):
    common = ["--model-organization", "Acme", "--model-name", "oracle", "--min-trials", "1"]
    scripted = tmp_path / "scripted"
    assert (
        cli("rollout", "--domain", "airline", "--split", "base", "--tasks", "0-1", "--out", str(scripted)).returncode
        == 0
    )
    line = refusal(str(scripted), "--out", str(tmp_path / "o1"), *common)
    assert "'scripted' user, not an LLM user simulator" in line and "gpt-5.2" in line, line

    partial = tmp_path / "partial"
    argv = ["rollout", "--domain", "airline", "--split", "base", "--tasks", "0-1", "--nl-assertions", "exclude"]
    argv += ["--user", "llm", "--user-base-url", user_url, "--user-model", "scripted-user", "--out", str(partial)]
    assert cli(*argv).returncode == 0
    line = refusal(str(partial), "--out", str(tmp_path / "o2"), *common)
    assert "holds 2 of the 50 tasks of airline's base split" in line, line

    unfinished = tmp_path / "unfinished"
    shutil.copytree(llm_user_run, unfinished)
    summary = json.loads((unfinished / "summary.json").read_text())
    (unfinished / "summary.json").write_text(json.dumps({**summary, "state": "interrupted"}))
    line = refusal(str(unfinished), "--out", str(tmp_path / "o3"), *common)
    assert "is not a finished run" in line and "--resume" in line, line

    line = refusal(str(llm_user_run), str(llm_user_run), "--out", str(tmp_path / "o4"), *common)
    assert "both play airline; the leaderboard takes one per domain" in line, line

    line = refusal(str(llm_user_run), "--out", str(tmp_path / "o5"), *common, "--submission-type", "standard")
    assert "not the leaderboard's default gpt-5.2" in line, line
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 6))


def test_the_checks_need_no_tau_import():
    """The refusals before writing are plain Python: ``export_run`` imports no τ module."""
    code = (
        "import sys, slime_tau_plugin.tools.cli.run_dir.export_run; "
        "print([m for m in sys.modules if m.startswith('tau2')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]
