"""τ's tool schemas in the system message, for chat templates that ignore ``tools`` (``tau_tools_in_prompt: system``).

Some chat templates render no tool schema at all (the npm packages' Llama 3.1 and DeepSeek V3 templates): a model
trained through them never sees the tools it is scored on. The template probe refuses such a template
(``template_probe.tools_missing``); under ``tau_tools_in_prompt: system`` the schemas go into the system message
instead, with the call format described by SGLang's own detector for the configured ``tau_tool_call_parser``
(its ``structure_info``: the text that opens and closes one call), so the model is told the format the parser
reads. Imports no trainer; SGLang's parsers through ``tool_calls``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.chat.sglang_import import import_sglang_parsers
from slime_tau_plugin.engine.errors import ConfigError

NAME, ARGUMENTS = "NAME", "ARGUMENTS"


def tools_system_text(tools: Sequence[dict[str, Any]], tool_call_parser: str) -> str:
    """The block appended to the system message: every schema, then how to write one call.

    Raises:
        ConfigError: SGLang cannot describe the parser's call format (no ``structure_info``).
    """
    function_call_parser = import_sglang_parsers()[0]
    detector_cls = getattr(function_call_parser, "ToolCallParserEnum", {}).get(tool_call_parser)
    try:
        info = detector_cls().structure_info()(NAME)
        begin, end = str(info.begin), str(info.end)
    except Exception as exc:  # noqa: BLE001 - SGLang raises NotImplementedError (or worse) for such detectors
        raise ConfigError(
            f"tau_tools_in_prompt=system needs a tool-call format SGLang can describe; tau_tool_call_parser="
            f"{tool_call_parser!r} has none (structure_info: {type(exc).__name__}); use a template that renders "
            "tools, or a parser such as qwen25, llama3, deepseekv3, mistral, kimi_k2"
        ) from exc
    schemas = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "\n\n# Tools\n\nYou may call the functions described by these JSON schemas:\n"
        f"{schemas}\n\n"
        f"To call a function, write exactly:\n{begin}{ARGUMENTS}{end}\n"
        f"where {NAME} is the function's name and {ARGUMENTS} its arguments as one JSON object."
    )
