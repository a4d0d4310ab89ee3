"""``slime-tau rollout`` when things go wrong around it (issue 17): an unusable ``--out``, signals from a
terminal or a scheduler, a resume with another task set, a policy server that dies mid-run.

Everything is a real subprocess against our servers on 127.0.0.1: real SIGTERM/SIGINT, a real killed server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.tools.cli.test_cli_rollout import CLI, assert_one_line_error, error_lines, free_port, rows_of, slime_tau


@pytest.mark.parametrize("where", ["through_a_file", "proc"])
def test_an_out_that_cannot_be_created_is_one_line_before_any_server_starts(where, tmp_path):
    if where == "through_a_file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "run"
    else:
        out = Path("/proc/slime-tau-run")
    done = slime_tau(["rollout", "--tasks", "0", "--out", str(out)])
    line = assert_one_line_error(done, "--out", str(out))
    assert "started the built-in" not in done.stderr, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders")
def test_an_out_in_a_read_only_folder_is_one_line(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert_one_line_error(slime_tau(["rollout", "--out", str(locked / "run")]), "--out", "Permission denied")
    finally:
        locked.chmod(0o700)


def serve_process(*args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [*CLI, "serve", *args, "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    pytest.fail(f"slime-tau serve did not come up: {proc.communicate()[0][-2000:]}")


@pytest.fixture
def slow_server(qwen25_dir, tau2_backend) -> Iterator[tuple[subprocess.Popen, str]]:
    proc, url = serve_process("--policy", "echo", "--latency-ms", "300", "--tokenizer", qwen25_dir)
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def test_a_client_that_disconnects_mid_request_prints_no_traceback_from_serve(slow_server):
    proc, url = slow_server
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4}}).encode()
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
        sock.close()
    time.sleep(1.5)  # the replies are written to closed sockets after the 300 ms latency
    assert httpx.get(f"{url}/health", timeout=5).status_code == 200, "the server keeps serving"
    proc.terminate()
    output = proc.communicate(timeout=30)[0]
    assert "Traceback" not in output and "Exception occurred" not in output, output


def start_rollout(url: str, tokenizer: str, out: Path, *extra: str) -> subprocess.Popen:
    argv = [*CLI, "rollout", "--sglang-url", url, "--tokenizer", tokenizer, "--tasks", "0-9"]
    argv += ["--samples-per-task", "2", "--concurrency", "2", "--out", str(out), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_rows(proc: subprocess.Popen, out: Path, rows: int) -> None:
    samples = out / "samples.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if samples.exists() and len(samples.read_text().splitlines()) >= rows:
            return
        time.sleep(0.1)
    assert proc.poll() is None, "the run must still be going when the signal comes"


def test_sigterm_ends_the_run_like_ctrl_c_with_a_summary_of_what_finished(slow_server, qwen25_dir, tmp_path):
    out = tmp_path / "run"
    proc = start_rollout(slow_server[1], qwen25_dir, out)
    wait_for_rows(proc, out, 3)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "to continue, run the same command with --resume" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["state"] == "interrupted" and summary["samples"] == len(rows_of(out)) >= 3
    assert summary["domains"]["tau2/retail"]["samples"] == summary["samples"]


def test_two_ctrl_c_close_together_still_leave_a_summary_that_says_what_the_run_holds(
    slow_server, qwen25_dir, tmp_path
):
    out = tmp_path / "run"
    proc = start_rollout(slow_server[1], qwen25_dir, out)
    wait_for_rows(proc, out, 3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["state"] == "interrupted", summary["state"]  # the word the terminal printed, not "killed"
    if summary.get("stopped_at_once"):
        assert "interrupted (stopped at once by a second Ctrl-C/SIGTERM)" in stderr, stderr
    else:
        assert "interrupted: " in stderr, stderr
    assert summary["samples"] == len(rows_of(out)) >= 3 and summary["domains"], "it says what it holds"


def test_compare_says_when_a_run_is_unfinished(qwen25_dir, tau2_backend, tmp_path):
    done = slime_tau(["rollout", "--tokenizer", qwen25_dir, "--tasks", "0-1", "--out", str(tmp_path / "a")])
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "summary.json").write_text(json.dumps({**summary, "state": "running"}))
    shown = slime_tau(["show", str(tmp_path / "a"), "--compare", str(tmp_path / "b")])
    assert shown.returncode == 0, shown.stderr
    assert "note: run B is unfinished: its summary still says running" in shown.stdout
    assert "holds 2 of 2 planned samples" in shown.stdout and "run A is" not in shown.stdout


@pytest.mark.parametrize(
    ("flags", "setting"),
    [(["--domain", "airline"], "domain="), (["--samples-per-task", "2"], "samples_per_task="), ([], "task ids=")],
)
def test_resume_refuses_another_task_set(flags, setting, qwen25_dir, tau2_backend, tmp_path):
    out = str(tmp_path / "run")
    first = slime_tau(["rollout", "--tokenizer", qwen25_dir, "--tasks", "0-1", "--out", out])
    assert first.returncode == 0, first.stderr
    tasks = ["--tasks", "0"] if not flags else ["--tasks", "0-1"]
    again = slime_tau(["rollout", "--tokenizer", qwen25_dir, *tasks, *flags, "--out", out, "--resume"])
    assert_one_line_error(again, "--resume", setting)
    assert len(rows_of(Path(out))) == 2, "nothing was played into the run"


def test_a_policy_server_killed_mid_run_is_failures_not_wrong_answers(slow_server, qwen25_dir, tmp_path):
    server, url = slow_server
    out = tmp_path / "run"
    proc = start_rollout(url, qwen25_dir, out, "--concurrency", "4", "--outage-tolerance-s", "2")
    wait_for_rows(proc, out, 3)
    server.kill()
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 1, stderr
    summary = json.loads((out / "summary.json").read_text())
    domain = summary["domains"]["tau2/retail"]
    assert summary["failed"] >= 1 and domain["failed"] == summary["failed"]
    completed = summary["samples"] - summary["failed"]
    assert sum(trials for _, trials in domain["per_task"].values()) == completed, "pass^k counts the completed"
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    kept = [row["reward"] for row in rows if row["status"] != "failed"]
    assert len(kept) == completed and domain["reward_mean"] == pytest.approx(sum(kept) / len(kept)), "so is the mean"
    assert f"above --max-failed-share 0.1; pass^k counts only the {completed} that completed" in stderr
    assert f"({summary['failed']} more FAILED, not counted in pass^k)" in stdout
    warnings = [line for line in error_lines(stderr) if line.startswith("WARNING")]
    assert 1 <= len(warnings) <= 3, "one warning per endpoint problem, not per request:\n" + "\n".join(warnings)
    other = tmp_path / "other"
    (other).mkdir()
    (other / "summary.json").write_text((out / "summary.json").read_text())
    shown = slime_tau(["show", str(other), "--compare", str(out)])
    assert f"note: run B: {summary['failed']} of {summary['samples']} samples FAILED" in shown.stdout


def test_a_raised_threshold_lets_a_partly_failed_run_exit_0(slow_server, qwen25_dir, tmp_path):
    server, url = slow_server
    out = tmp_path / "run"
    proc = start_rollout(
        url, qwen25_dir, out, "--concurrency", "4", "--max-failed-share", "1", "--outage-tolerance-s", "2"
    )
    wait_for_rows(proc, out, 3)
    server.kill()
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, stderr
    assert "samples FAILED" in stderr and "warning:" in stderr


def test_cli_errors_name_the_cli_flags_not_the_yaml_keys():
    done = slime_tau(["rollout", "--user", "llm", "--user-base-url", "http://127.0.0.1:9/v1"])
    line = assert_one_line_error(done, "--user-model")
    assert "tau_" not in line, line


def test_max_failed_share_outside_0_to_1_is_refused():
    done = slime_tau(["rollout", "--max-failed-share", "1.5"])
    assert done.returncode == 2 and "--max-failed-share" in done.stderr and "from 0 to 1" in done.stderr


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("POSIX signals")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["serve", "--script", "x.json"], "--script holds the scripted policy's replies; add --policy scripted"),
        (["rollout", "--policy-model", "x"], "--policy-model names the model for --policy-api openai-completions"),
        (["prepare", "--out", "t.jsonl", "--eval-samples", "4"], "--eval-samples sets the episodes per eval task"),
    ],
)
def test_flags_that_would_be_ignored_are_refused(argv, needle, tmp_path):
    done = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert_one_line_error(done, needle, command=argv[0])
    assert not (tmp_path / "t.jsonl").exists()


def test_show_names_a_broken_middle_line_and_offers_the_right_range(qwen25_dir, tau2_backend, tmp_path):
    out = tmp_path / "run"
    done = slime_tau(["rollout", "--tokenizer", qwen25_dir, "--tasks", "0-5", "--out", str(out)])
    assert done.returncode == 0, done.stderr
    lines = (out / "samples.jsonl").read_text().splitlines()
    lines[2] = lines[2][: len(lines[2]) // 2]
    (out / "samples.jsonl").write_text("\n".join(lines) + "\n")
    shown = slime_tau(["show", str(out), "--sample", "4"])
    assert shown.returncode == 0, shown.stderr
    assert "line(s) 3 are not complete JSON rows (samples 2); showing the 5 complete samples (0-1, 3-5)" in shown.stderr
    broken = slime_tau(["show", str(out), "--sample", "2"])
    assert_one_line_error(broken, "pick another --sample (0-1, 3-5)", command="show")


def test_a_context_bound_below_the_first_prompt_is_refused_naming_both_numbers(tau2_backend, tmp_path):
    out = tmp_path / "run"
    done = slime_tau(["rollout", "--max-context-len", "100", "--tasks", "0", "--out", str(out)])
    line = assert_one_line_error(done, "--max-context-len 100 is shorter than the first prompt of task 0")
    assert "pass --max-context-len above" in line and "started the built-in" not in done.stderr
    assert not out.exists()
