"""Every tool-call format the oracle writes is read back, call for call, by our parser with SGLang's detector."""

from __future__ import annotations

from typing import Any

import pytest

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers.tool_call_formats import FORMATS, format_tool_call, get_format
from tests.conftest import require_sglang_parsers

require_sglang_parsers()

from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser, check_parser_names  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "modify_pending_order_items",
            "description": "Swap items of a pending order.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string"},
                    "item_ids": {"type": "array", "items": {"type": "string"}},
                    "new_item_ids": {"type": "array", "items": {"type": "string"}},
                    "payment_method_id": {"type": "string"},
                },
                "required": ["order_id", "item_ids", "new_item_ids", "payment_method_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_all_product_types",
            "description": "No arguments.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an expression.",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
        },
    },
]

CALLS: list[tuple[str, dict[str, Any]]] = [
    (
        "modify_pending_order_items",
        {
            "order_id": "#W2378156",
            "item_ids": ["1151293680", "4983901480"],
            "new_item_ids": ["7706410293", "7747408585"],
            "payment_method_id": "credit_card_9513926",
        },
    ),
    ("list_all_product_types", {}),
    ("calculate", {"expression": 'price "A" [1, 2]; {x} é \\ ```'}),  # quotes, brackets, a fence
]
"""An argument holding a format's own closing marker (``</tool_call>``) cannot round-trip in any wire format."""

CASES = [(fmt, name, args) for fmt in sorted(FORMATS) for name, args in CALLS]


@pytest.mark.parametrize(("fmt", "name", "arguments"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_format_round_trips_through_its_sglang_parser(fmt, name, arguments):
    text = format_tool_call(name, arguments, fmt, index=2)
    action = ToolCallParser(TOOLS, fmt).parse(text)
    assert action.kind == "tool_calls", (text, action.reason)
    assert [(c.name, c.arguments) for c in action.calls] == [(name, arguments)]
    assert action.content == "", "nothing of the call is left over as text to the user"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_start_the_oracle_counts_opens_each_call_once(fmt):
    start = get_format(fmt).start
    for name, arguments in CALLS[:2]:
        assert format_tool_call(name, arguments, fmt).count(start) == 1


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_is_named_after_a_parser_sglang_knows(fmt):
    check_parser_names(fmt)


def test_aliases_write_what_their_parser_reads():
    assert get_format("qwen") is get_format("hermes") is get_format("qwen25")


@pytest.mark.parametrize("fmt", ["pythonic", "glm45", "Llama3", ""])
def test_a_format_the_oracle_cannot_write_is_refused_naming_it(fmt):
    with pytest.raises(ConfigError, match=f"format {fmt!r}; supported: .*llama3.*--sglang-url"):
        get_format(fmt)


def test_kimi_k2_numbers_calls_across_the_conversation():
    assert "functions.calculate:3<|tool_call_argument_begin|>" in format_tool_call("calculate", {}, "kimi_k2", index=3)
