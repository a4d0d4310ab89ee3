"""Which SGLang tool-call parser reads a model reply: the family a wrong ``tau_tool_call_parser`` should have been.

An opening marker does not name a family: ``<tool_call>`` opens glm, hermes, qwen25 and seven more formats. The
family is the parser that turns the reply into calls of the episode's own tools, tried with SGLang's own
``FunctionCallParser`` (common families first, then the rest of SGLang's table in name order). Used where a
reply was already found foreign (``tool_calls.py``'s warning, the CLI's early stop), never per healthy turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.chat.sglang_import import import_sglang_parsers

COMMON_FIRST = ("qwen25", "llama3", "mistral", "deepseekv3", "glm45", "kimi_k2", "gpt-oss", "qwen3_coder")
"""Tried first, so an alias (``qwen``, ``hermes``) never hides the name a user knows."""


def reply_family(text: str, tools: Sequence[dict[str, Any]], exclude: str | None = None) -> str | None:
    """The first parser name (other than ``exclude``) that reads ``text`` as calls of ``tools``; None if none does.

    ``tools`` are OpenAI tool schemas (``{"type": "function", "function": {...}}``), as the episode sent them.
    """
    function_call_parser, tool_cls, function_cls, _ = import_sglang_parsers()
    table = getattr(function_call_parser, "ToolCallParserEnum", {})
    names = {t["function"]["name"] for t in tools}
    sgl_tools = [tool_cls(type="function", function=function_cls(**t["function"])) for t in tools]
    order = [n for n in COMMON_FIRST if n in table] + sorted(n for n in table if n not in COMMON_FIRST)
    for name in order:
        if name == exclude:
            continue
        try:
            _, items = function_call_parser(tools=sgl_tools, tool_call_parser=name).parse_non_stream(text)
        except Exception:  # a detector that cannot read this text (or needs more than SGLang gives it here)
            continue
        if items and all(item.name in names for item in items):
            return name
    return None
