"""Every real chat template end to end through slime's ``generate``: oracle episodes on τ² retail, real HTTP.

Exact families hold ``tokenize(apply_chat_template(messages))`` (Qwen2.5, Llama 3.1, and DeepSeek V3 through
rendered-history continuations; the last two with τ's tool schemas in the system message, as their npm templates
render none: ``tau_tools_in_prompt: system``); every prompt holds every tool's name; Qwen3 differs only in its
hidden old ``<think>`` blocks (documented);
Qwen3.5/3.6 (XML tool calls, thinking on and off) differs only in the ``<think>`` blocks its template drops;
DeepSeek V4 (DSML tool calls, thinking on and off, τ² retail's own tools) is exact with the template this repository
ships for it, whose retail prompt equals DeepSeek's own encoder's (``deepseek_v4_recipe.json``);
Gemma 3 is refused before any episode, by ``generate`` (``ConfigError``) and by the CLI (exit 2, one line).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.chat.template_text import with_system_text
from slime_tau_plugin.engine.chat.tool_prompt import tools_system_text
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers.fake_models import THOUGHT
from tests.conftest import ROOT
from tests.contracts.slime_sample import Sample
from tests.engine.chat.test_template_families import _tokenizer, tokenizer_dir
from tests.invariants import assert_sample_invariants, assert_tito
from tests.slime_args import slime_args

SAMPLING = {"temperature": 1.0, "max_new_tokens": 2048, "no_stop_trim": True, "skip_special_tokens": False}
TASKS = 8
FAMILIES = {  # family: (template_mode, exact, tools_in_prompt)
    "qwen2_5": ("anchored", True, "template"),
    "llama3_1": ("anchored", True, "system"),  # the npm template renders no tool schema
    "deepseek_v3": ("rendered_history", True, "system"),  # nor this one
    "qwen3": ("anchored", False, "template"),
}
THINK = re.compile(r"<think>.*?</think>\s*", re.S)


def _requests(server, sample) -> list[dict]:
    mine = [r for r in server.requests if str(r.get("rid", "")).startswith(f"{sample.session_id}-")]
    return sorted(mine, key=lambda r: int(r["rid"].rsplit("-", 1)[1]))


async def _play(args: SimpleNamespace, samples: list) -> None:
    await asyncio.gather(*[generate(args, s, SAMPLING) for s in samples])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_oracle_rollout_through_generate_is_exact_or_documented_per_family(
    tau2_backend, oracle_server_factory, family: str
) -> None:
    mode, exact, tools_in = FAMILIES[family]
    path = tokenizer_dir(family)
    tokenizer = _tokenizer(path)
    server = oracle_server_factory(tokenizer, (("retail", "train"),))
    refs = tau2_backend.task_refs("retail", "train")[:TASKS]
    samples = [
        Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"{family}-{i}")
        for i, row in enumerate(task_row(j, ref) for j, ref in enumerate(refs))
    ]
    args = slime_args(server, path, tau_tools_in_prompt=tools_in)
    asyncio.run(_play(args, samples))
    matched = 0
    for sample in samples:
        assert_sample_invariants(sample)
        assert_tito(sample, _requests(server, sample))
        assert sample.reward == 1.0, sample.metadata.get("error") or sample.metadata.get("reward_info")
        assert (sample.metadata["template_mode"], sample.metadata["template_fallbacks"]) == (mode, 0)
        meta = sample.metadata
        assert meta["tools_in_prompt"] == tools_in
        messages, tools = meta["messages"], meta["tools"]
        if tools_in == "system":  # the schemas are in the system message, in the parser's call format
            messages, tools = with_system_text(messages, tools_system_text(tools, "qwen25")), None
        text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        assert all(t["function"]["name"] in tokenizer.decode(sample.tokens) for t in meta["tools"])
        full = tokenizer.encode(text, add_special_tokens=False)
        if exact:  # Qwen's render ends the last turn with a "\n" the model never sampled
            tail = full[len(sample.tokens) :]
            matched += full[: len(sample.tokens)] == sample.tokens and not tokenizer.decode(tail).strip()
        else:
            held = tokenizer.decode(sample.tokens)
            assert held != text.rstrip("\n")
            matched += THINK.sub("", held) == THINK.sub("", text).rstrip("\n")
    assert matched == TASKS, f"{family}: {matched}/{TASKS} samples equal the template's render"


def test_generate_refuses_gemma3_before_any_episode(tau2_backend) -> None:
    sample = Sample(prompt=0, metadata={}, session_id="gemma3-0")
    args = slime_args("http://127.0.0.1:9", tokenizer_dir("gemma3"))  # nothing listens: no request may be sent
    with pytest.raises(ConfigError, match=r"gemma3' cannot run τ episodes: .*roles must alternate"):
        asyncio.run(generate(args, sample, SAMPLING))
    assert not sample.metadata


def test_cli_refuses_gemma3_with_one_line_and_exit_2(tmp_path) -> None:
    path = tokenizer_dir("gemma3")
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "rollout", "--tokenizer", path, "--tasks", "0"]
    proc = subprocess.run([*cmd, "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("slime-tau rollout: error:")]
    assert len(lines) == 1 and f"tokenizer {path!r} cannot run τ episodes" in lines[0], proc.stderr
    assert "roles must alternate" in lines[0]


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_qwen35_oracle_rollout_is_exact_but_for_old_think_blocks_with_xml_calls(
    tau2_backend, oracle_server_factory, thinking: bool
) -> None:
    """Qwen3.5/3.6 through ``generate``: the oracle calls τ's tools in XML (SGLang's ``qwen3_coder`` reads them),
    thinking on (the generation prompt opens ``<think>``; SGLang's ``qwen3-thinking`` splits the reasoning off) and
    off; the held ids differ from the template's render only in the ``<think>`` blocks it drops from old turns."""
    path = tokenizer_dir("qwen3_5")
    tokenizer = _tokenizer(path)
    server = oracle_server_factory(tokenizer, (("retail", "train"),), tool_call_format="qwen3_coder")
    refs = tau2_backend.task_refs("retail", "train")[:TASKS]
    samples = [
        Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"qwen3_5-{thinking}-{i}")
        for i, row in enumerate(task_row(j, ref) for j, ref in enumerate(refs))
    ]
    args = slime_args(
        server,
        path,
        tau_tool_call_parser="qwen3_coder",
        tau_reasoning_parser="qwen3-thinking" if thinking else None,
        tau_enable_thinking=thinking,
    )
    asyncio.run(_play(args, samples))
    matched = calls = 0
    for sample in samples:
        assert_sample_invariants(sample)
        assert_tito(sample, _requests(server, sample))
        assert sample.reward == 1.0, sample.metadata.get("error") or sample.metadata.get("reward_info")
        meta = sample.metadata
        assert (meta["template_mode"], meta["template_fallbacks"], meta["parse_errors"]) == ("anchored", 0, 0)
        text = tokenizer.apply_chat_template(
            meta["messages"], tools=meta["tools"], tokenize=False, enable_thinking=thinking
        )
        held = tokenizer.decode(sample.tokens)
        assert all(t["function"]["name"] in held for t in meta["tools"])
        calls += held.count("<tool_call>\n<function=") - 1  # the system prompt's example call
        assert held.count("<think>") == held.count("</think>") and (THOUGHT in held) == thinking
        matched += THINK.sub("", held) == THINK.sub("", text).rstrip("\n")
    assert calls > TASKS, "the oracle's XML calls were read and answered"
    assert matched == TASKS, f"qwen3_5: {matched}/{TASKS} samples equal the template's render but for old <think>"


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_deepseek_v4_oracle_rollout_is_exact_with_dsml_calls_and_retails_tools(
    tau2_backend, oracle_server_factory, thinking: bool
) -> None:
    """DeepSeek V4 through ``generate``: τ² retail's own tools in DeepSeek's schema block, the oracle's DSML calls read
    by SGLang's ``deepseekv4``, thinking on (the prompt opens ``<think>``; ``deepseek-v4`` splits the reasoning off,
    forced open as SGLang's server forces it) and off; the held ids equal the template's render token for token."""
    path = tokenizer_dir("deepseek_v4")
    tokenizer = _tokenizer(path)
    server = oracle_server_factory(tokenizer, (("retail", "train"),), tool_call_format="deepseekv4")
    refs = tau2_backend.task_refs("retail", "train")[:TASKS]
    samples = [
        Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"deepseek_v4-{thinking}-{i}")
        for i, row in enumerate(task_row(j, ref) for j, ref in enumerate(refs))
    ]
    args = slime_args(
        server,
        path,
        tau_tool_call_parser="deepseekv4",
        tau_reasoning_parser="deepseek-v4" if thinking else None,
        tau_enable_thinking=thinking,
    )
    asyncio.run(_play(args, samples))
    matched = calls = 0
    for sample in samples:
        assert_sample_invariants(sample)
        assert_tito(sample, _requests(server, sample))
        assert sample.reward == 1.0, sample.metadata.get("error") or sample.metadata.get("reward_info")
        meta = sample.metadata
        assert (meta["template_mode"], meta["template_fallbacks"], meta["parse_errors"]) == ("anchored", 0, 0)
        text = tokenizer.apply_chat_template(
            meta["messages"], tools=meta["tools"], tokenize=False, enable_thinking=thinking
        )
        held = tokenizer.decode(sample.tokens)
        assert all(json.dumps(t["function"]["parameters"], ensure_ascii=False) in held for t in meta["tools"])
        calls += held.count('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="') - 1  # the system prompt's example call
        assert (THOUGHT in held) == thinking
        matched += tokenizer.encode(text, add_special_tokens=False) == sample.tokens
    assert calls > TASKS, "the oracle's DSML calls were read and answered"
    recipe = json.loads((ROOT / "tests/fixtures/chat_templates/deepseek_v4_recipe.json").read_text())
    opening = [{"role": "system", "content": "P"}, {"role": "user", "content": "U"}]
    prompt = tokenizer.apply_chat_template(
        opening, tools=meta["tools"], tokenize=False, add_generation_prompt=True, enable_thinking=thinking
    )  # τ² retail's own 15 tools, in DeepSeek's encoder's words
    assert prompt == recipe["retail_prompt"]["thinking" if thinking else "no_thinking"]
    assert matched == TASKS, f"deepseek_v4: {matched}/{TASKS} samples equal the template's render token for token"
