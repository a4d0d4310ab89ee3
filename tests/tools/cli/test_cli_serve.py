"""``slime-tau serve`` bad input: a busy port or a missing/broken ``--script`` is one line and exit 2."""

from __future__ import annotations

import socket

import pytest

from tests.tools.cli.test_cli_rollout import assert_one_line_error, slime_tau


@pytest.fixture
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_serve_on_a_busy_port_is_one_line(busy_port, qwen25_dir):
    done = slime_tau(["serve", "--policy", "echo", "--tokenizer", qwen25_dir, "--port", str(busy_port)])
    assert_one_line_error(done, f"cannot listen on 127.0.0.1:{busy_port}", "choose another --port", command="serve")


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "cannot read it"), ("[1,", "not valid JSON"), ('{"a": 1}', "expected a non-empty JSON list of strings")],
    ids=["missing", "broken", "not-a-list"],
)
def test_serve_with_a_bad_script_is_one_line(tmp_path, qwen25_dir, content, needle):
    script = tmp_path / "script.json"
    if content is not None:
        script.write_text(content, encoding="utf-8")
    done = slime_tau(["serve", "--policy", "scripted", "--script", str(script), "--tokenizer", qwen25_dir])
    assert_one_line_error(done, f"--script {script}", needle, command="serve")


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--port", "99999"], "argument --port: 99999 is invalid; expected a port in 0-65535"),
        (["--port", "-1"], "expected a port in 0-65535"),
        (["--latency-ms", "-5"], "argument --latency-ms: -5 is invalid; expected a number >= 0"),
        (["--context-len", "0"], "argument --context-len: 0 is invalid; expected an integer >= 1"),
    ],
)
def test_serve_with_out_of_range_numbers_is_one_line(flags, needle):
    assert_one_line_error(slime_tau(["serve", "--policy", "echo", *flags]), needle, command="serve")


def test_a_library_message_over_several_lines_is_still_one_line(tmp_path):
    """transformers explains an unloadable tokenizer over several lines; the CLI's error stays one."""
    done = slime_tau(["rollout", "--tokenizer", str(tmp_path), "--out", str(tmp_path / "run")])
    assert_one_line_error(done, f"cannot load a tokenizer from '{tmp_path}'", "pass a local Hugging Face")
