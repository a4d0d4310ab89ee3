"""``slime-tau rollout --resume`` and the early checks, tried as a new user would (issue 34 §7).

A resume of a folder that is not there, a resume after a policy outage that wants its FAILED samples played
again, a resume with another prompt format, a worker flag without workers: each is one line and a non-zero exit,
or does what it says. Real HTTP against our SGLang-protocol server on 127.0.0.1, real τ² tasks and templates.
"""

from __future__ import annotations

import json
import socket

import pytest

from slime_tau_plugin.tools.cli.main import main
from slime_tau_plugin.tools.cli.play.runner import RolloutSample, summarize
from slime_tau_plugin.tools.servers.fake_models import EchoModel
from tests.server_faults import FailingModel
from tests.tools.cli.test_cli_rollout import pairs_of, rows_of


def _error(capsys, command: str = "rollout") -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "[transformers]" not in line]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"slime-tau {command}: error:"), lines[0]
    return lines[0]


@pytest.mark.parametrize("made", [False, True], ids=["missing", "empty"])
def test_resume_of_a_folder_with_no_run_is_refused(made, qwen25_dir, tmp_path, capsys):
    out = tmp_path / "typo"
    if made:
        out.mkdir()
    assert main(["rollout", "--tokenizer", qwen25_dir, "--tasks", "0", "--out", str(out), "--resume"]) == 2
    line = _error(capsys)
    assert f"--out {out} {'is empty' if made else 'does not exist'}, so there is no run to continue" in line
    assert "drop --resume to start a new run there" in line
    assert out.exists() is made and (not made or not any(out.iterdir())), "nothing was written"


def test_retry_failed_needs_resume(qwen25_dir, tmp_path, capsys):
    assert main(["rollout", "--tokenizer", qwen25_dir, "--out", str(tmp_path / "r"), "--retry-failed"]) == 2
    assert "--retry-failed plays a run's FAILED samples again; add --resume" in _error(capsys)


def test_resume_retries_failed_samples_only_when_asked(serve, qwen25, qwen25_dir, tau2_backend, tmp_path, capsys):
    down = serve(FailingModel(qwen25, 400, "the GPU node is being drained"))  # 400: FAILED at once, no retry
    out = tmp_path / "run"
    common = ["rollout", "--tokenizer", qwen25_dir, "--tasks", "0-2", "--out", str(out)]
    assert main([*common, "--sglang-url", down.url]) == 1
    err = capsys.readouterr().err
    assert "error: all 3 samples FAILED" in err
    assert f"the same command with --resume --retry-failed --out {out}" in err
    assert [row["status"] for row in rows_of(out)] == ["failed"] * 3

    up = serve(EchoModel(qwen25))
    assert main([*common, "--sglang-url", up.url, "--resume"]) == 1  # kept as they are: nothing to play
    err = capsys.readouterr().err
    assert "--resume: 3 samples kept, 0 to play" in err
    assert "--resume: 3 of the kept samples FAILED or passed their deadline; add --retry-failed" in err
    assert not up.requests

    assert main([*common, "--sglang-url", up.url, "--resume", "--retry-failed"]) == 0
    err = capsys.readouterr().err
    assert "--resume: 0 samples kept, 3 to play (3 FAILED or past their deadline, played again)" in err
    rows = rows_of(out)
    assert sorted(pairs_of(rows)) == [(str(i), 0) for i in range(3)] and all(r["status"] != "failed" for r in rows)
    retried = [json.loads(line) for line in (out / "retried.jsonl").read_text().splitlines()]
    assert [row["status"] for row in retried] == ["failed"] * 3, "the FAILED rows are kept aside, not lost"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["samples"] == 3 and summary["failed"] == 0


def test_resume_refuses_another_prompt_format_and_records_it(serve, qwen25, qwen25_dir, tau2_backend, tmp_path, capsys):
    server = serve(EchoModel(qwen25))
    out = tmp_path / "run"
    argv = ["rollout", "--sglang-url", server.url, "--tokenizer", qwen25_dir, "--tasks", "0", "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    run = json.loads((out / "summary.json").read_text())["run"]
    assert run["policy"]["tools_in_prompt"] == "template"
    assert main([*argv, "--resume", "--tools-in-prompt", "system"]) == 2
    line = _error(capsys)
    assert "policy.tools_in_prompt='template', this command gives 'system'" in line
    assert len(rows_of(out)) == 1, "nothing was played into the run"


def test_an_episode_worker_flag_without_workers_is_refused(qwen25_dir, tmp_path, capsys):
    for flags in (["--episode-worker-kind", "process"], ["--episode-worker-cpus", "1"]):
        assert main(["rollout", "--tokenizer", qwen25_dir, "--out", str(tmp_path / "r"), *flags]) == 2
        assert f"{flags[0]} does nothing without --episode-workers N" in _error(capsys)
    assert not (tmp_path / "r").exists()


def test_mean_turns_leaves_failed_samples_out_like_mean_reward():
    def sample(task: str, turns: int, status: RolloutSample.Status, reward: float) -> RolloutSample:
        meta = {"benchmark": "tau2", "domain": "retail", "task_id": task, "num_turns": turns}
        meta["termination_reason"] = "user_stop" if status is RolloutSample.Status.COMPLETED else "policy_error"
        return RolloutSample(metadata=meta, reward=reward, status=status)

    done, failed = RolloutSample.Status.COMPLETED, RolloutSample.Status.FAILED
    summary = summarize([sample("0", 6, done, 1.0), sample("1", 4, done, 0.0), sample("2", 0, failed, 0.0)], 1, 1.0)
    domain = summary["domains"]["tau2/retail"]
    assert domain["turns_mean"] == 5.0 and domain["reward_mean"] == 0.5 and domain["failed"] == 1


@pytest.mark.parametrize(
    ("flag", "value", "known"), [("--tool-call-parser", "qwen2.5", "qwen25"), ("--reasoning-parser", "qwen-3", "qwen3")]
)
def test_a_mistyped_parser_is_refused_before_anything_is_written_or_asked(
    flag, value, known, serve, qwen25, qwen25_dir, tmp_path, capsys
):
    server = serve(EchoModel(qwen25))
    out = tmp_path / "run"
    argv = ["rollout", "--sglang-url", server.url, "--tokenizer", qwen25_dir, "--out", str(out), flag, value]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{flag}={value!r} is unknown; expected one of" in line and known in line
    assert not out.exists() and not server.requests, "no folder written, no server asked"


def test_a_run_stopped_before_its_first_sample_leaves_no_folder_that_blocks_a_rerun(tmp_path):
    from slime_tau_plugin.tools.cli.run_dir.run_output import (
        choose_run_dir,
        discard_unplayed,
        open_run_dir,
        write_summary,
    )

    out = tmp_path / "run"
    run = choose_run_dir(str(out), resume=False, overwrite=False)
    open_run_dir(run)
    write_summary(run, {"state": "running"})
    run.samples_path.touch()
    discard_unplayed(run)
    assert not out.exists()
    assert choose_run_dir(str(out), resume=False, overwrite=False).path == out  # not refused


def test_serve_on_a_busy_port_is_refused_before_anything_loads(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        # a tokenizer folder that does not exist: the port is checked before anything loads
        assert main(["serve", "--port", str(port), "--tokenizer", "/nonexistent/tokenizer"]) == 2
    line = _error(capsys, "serve")
    assert f"--host 127.0.0.1 --port {port}: cannot listen on 127.0.0.1:{port}" in line
    assert "choose another --port" in line


def test_a_wrong_tokenizer_folder_names_the_flag_that_gave_it(tmp_path, capsys):
    assert main(["rollout", "--tokenizer", str(tmp_path / "nope"), "--tasks", "0", "--out", str(tmp_path / "r")]) == 2
    line = _error(capsys)
    assert "no such directory" in line and "to --tokenizer" in line and "hf-checkpoint" not in line
    assert not (tmp_path / "r").exists()


def test_verify_with_a_wrong_model_folder_names_model_not_slimes_flags(qwen25_dir, tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert main(["rollout", "--tokenizer", qwen25_dir, "--tasks", "0", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--model", str(tmp_path)]) == 2
    line = _error(capsys, "verify")
    assert "to --model" in line and "hf-checkpoint" not in line


def test_the_parse_check_waits_for_the_first_episodes_and_stops_only_on_most_turns():
    from slime_tau_plugin.tools.cli.play.parse_check import EarlyParseCheck, ParserMismatchError

    def sample(turns: int, errors: int) -> RolloutSample:
        return RolloutSample(metadata={"num_turns": turns, "parse_errors": errors})

    healthy = EarlyParseCheck("qwen25", planned=10, rerun="--overwrite --out r")
    for s in [sample(8, 4)] * 4 + [sample(8, 8)] * 6:  # half, not most; later episodes are not looked at
        healthy.add(s)
    broken = EarlyParseCheck("qwen25", planned=2, rerun="--overwrite --out r")
    broken.add(sample(4, 3))  # one of the first 2: not yet
    with pytest.raises(ParserMismatchError) as info:
        broken.add(sample(4, 4))
    assert str(info.value).startswith("stopped: 7 of the 8 model turns of the first 2 episodes are parse errors")
    assert "no SGLang parser reads the replies" in str(info.value) and str(info.value).endswith("--overwrite --out r")
