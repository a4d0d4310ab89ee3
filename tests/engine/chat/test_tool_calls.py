"""ToolCallParser over SGLang's real ``qwen25`` detector and ``qwen3`` reasoning parser (skipped without SGLang)."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.chat.tool_calls import ParsedCall, ToolCallParser
from slime_tau_plugin.engine.errors import ConfigError
from tests.conftest import require_sglang_parsers

require_sglang_parsers()

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_user",
            "description": "Find a user.",
            "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]},
        },
    },
    {
        "type": "function",
        "function": {"name": "cancel", "description": "Cancel.", "parameters": {"type": "object", "properties": {}}},
    },
]


def _block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


GET_USER = _block('{"name": "get_user", "arguments": {"user_id": "u1"}}')
CANCEL = _block('{"name": "cancel", "arguments": {}}')


@pytest.fixture(scope="module")
def parser() -> ToolCallParser:
    return ToolCallParser(TOOLS, "qwen25")


def test_one_call_is_parsed_with_its_arguments(parser: ToolCallParser) -> None:
    action = parser.parse(GET_USER)
    assert action.kind == "tool_calls"
    assert action.calls == (ParsedCall("get_user", {"user_id": "u1"}),)
    assert action.content == ""


def test_two_calls_are_parsed_in_order(parser: ToolCallParser) -> None:
    action = parser.parse(f"{GET_USER}\n{CANCEL}")
    assert action.kind == "tool_calls"
    assert [c.name for c in action.calls] == ["get_user", "cancel"]
    assert action.calls[1].arguments == {}


def test_text_before_a_call_becomes_content(parser: ToolCallParser) -> None:
    action = parser.parse(f"Let me look that up.\n{GET_USER}")
    assert action.kind == "tool_calls"
    assert action.content == "Let me look that up."
    assert len(action.calls) == 1


def test_no_call_is_a_message_to_the_user(parser: ToolCallParser) -> None:
    action = parser.parse("  Your order has shipped.\n")
    assert action.kind == "respond"
    assert action.content == "Your order has shipped."
    assert action.calls == ()


def test_broken_json_is_invalid_with_a_reason_about_json(parser: ToolCallParser) -> None:
    action = parser.parse(_block('{"name": "get_user", "arguments": {"user_id": '))
    assert action.kind == "invalid"
    assert "JSON" in action.reason
    assert action.calls == ()


def test_unknown_tool_is_invalid_and_lists_available_tools(parser: ToolCallParser) -> None:
    action = parser.parse(_block('{"name": "delete_everything", "arguments": {}}'))
    assert action.kind == "invalid"
    assert "delete_everything" in action.reason
    assert "get_user" in action.reason and "cancel" in action.reason


def test_unknown_tool_next_to_a_valid_call_makes_the_turn_invalid(parser: ToolCallParser) -> None:
    unknown = _block('{"name": "nope", "arguments": {}}')
    action = parser.parse(f"{GET_USER}\n{unknown}")
    assert action.kind == "invalid"
    assert "'nope'" in action.reason


def test_list_arguments_are_invalid(parser: ToolCallParser) -> None:
    action = parser.parse(_block('{"name": "get_user", "arguments": ["u1"]}'))
    assert action.kind == "invalid"
    assert "JSON object" in action.reason and "list" in action.reason


@pytest.mark.parametrize("scalar", ["42", '"get_user"', "null"])
def test_json_scalar_in_block_is_invalid_without_raising(parser: ToolCallParser, scalar: str) -> None:
    action = parser.parse(_block(scalar))
    assert action.kind == "invalid"
    assert action.reason
    assert action.content == _block(scalar)


def test_unknown_parser_name_is_a_config_error_listing_known_names() -> None:
    with pytest.raises(ConfigError, match="no_such_parser") as info:
        ToolCallParser(TOOLS, "no_such_parser")
    assert "qwen25" in str(info.value) and "hermes" in str(info.value)


def test_unknown_reasoning_parser_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="tau_reasoning_parser"):
        ToolCallParser(TOOLS, "qwen25", reasoning_parser="no_such_reasoner")


def test_qwen3_reasoning_parser_splits_think_from_a_call() -> None:
    action = ToolCallParser(TOOLS, "qwen25", reasoning_parser="qwen3").parse(
        f"<think>\nI need the user first.\n</think>\n\n{GET_USER}"
    )
    assert action.kind == "tool_calls"
    assert action.reasoning.strip() == "I need the user first."
    assert "<think>" not in action.content and "need the user" not in action.content
    assert action.calls == (ParsedCall("get_user", {"user_id": "u1"}),)


def test_qwen3_reasoning_parser_splits_think_from_a_reply() -> None:
    action = ToolCallParser(TOOLS, "qwen25", reasoning_parser="qwen3").parse("<think>hmm</think>\n\nHello!")
    assert (action.kind, action.content, action.reasoning) == ("respond", "Hello!", "hmm")


def test_without_reasoning_parser_think_text_stays_in_content(parser: ToolCallParser) -> None:
    action = parser.parse("<think>hmm</think>Hello!")
    assert action.kind == "respond"
    assert action.content == "<think>hmm</think>Hello!"
    assert action.reasoning == ""


LLAMA3_CALL = '<|python_tag|>{"name": "get_user", "parameters": {"user_id": "u1"}}'


def test_another_familys_tool_call_is_invalid_and_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    parser = ToolCallParser(TOOLS, "qwen25")  # its own instance: the warning is once per parser
    with caplog.at_level("WARNING", logger="slime_tau_plugin.engine.chat.tool_calls"):
        first, second = parser.parse(LLAMA3_CALL), parser.parse("Sure. " + LLAMA3_CALL)
    assert (first.kind, second.kind) == ("invalid", "invalid")
    assert "'<|python_tag|>'" in first.reason and first.blocks == 1 and first.calls == ()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "llama3" in warnings[0] and "--tool-call-parser" in warnings[0] and "'qwen25'" in warnings[0]


def test_the_matching_parser_reads_that_call() -> None:
    action = ToolCallParser(TOOLS, "llama3").parse(LLAMA3_CALL)
    assert action.kind == "tool_calls" and action.calls == (ParsedCall("get_user", {"user_id": "u1"}),)


def test_a_qwen_call_under_the_llama3_parser_is_invalid() -> None:
    action = ToolCallParser(TOOLS, "llama3").parse(GET_USER)
    assert action.kind == "invalid" and "'<tool_call>'" in action.reason
