"""How each model family writes a tool call, keyed by the name of the SGLang parser that reads it.

The built-in oracle writes its calls in one of these formats so that every template family runs end to
end with its own parser (``tau_tool_call_parser`` / ``--tool-call-parser``). Each writer produces what
SGLang's detector of the same name parses (``sglang/srt/function_call/<name>_detector.py``), and
``start`` is the text that opens every call: the oracle counts it in the conversation to know how many
calls it has already made. A parser whose calls have no fixed opening text (``pythonic``) is left out:
our ``ToolCallParser`` counts calls by the detector's start token and could not read it back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError

Writer = Callable[[str, dict[str, Any], int], str]
"""(tool name, arguments, how many calls the conversation already holds) -> the call as the model writes it."""


@dataclass(frozen=True, slots=True)
class ToolCallFormat:
    """One family's tool-call text: the opening the oracle counts and the writer."""

    name: str
    start: str
    """Text that opens every call (and appears nowhere else in a conversation of this family)."""
    write: Writer


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _hermes(name: str, arguments: dict[str, Any], index: int) -> str:
    """``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (Qwen2.5, Qwen3, Hermes)."""
    return f"<tool_call>\n{_json({'name': name, 'arguments': arguments})}\n</tool_call>"


def _qwen3_coder(name: str, arguments: dict[str, Any], index: int) -> str:
    """Qwen3-Coder / Qwen3.5 / Qwen3.6: XML, one ``<parameter=KEY>`` block per argument; a string value verbatim,
    any other as JSON (what their chat templates write, and what SGLang's detector converts back by the schema)."""
    params = "".join(
        f"<parameter={key}>\n{value if isinstance(value, str) else _json(value)}\n</parameter>\n"
        for key, value in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _llama3(name: str, arguments: dict[str, Any], index: int) -> str:
    """``<|python_tag|>{"name": ..., "parameters": {...}}``: Llama 3.x's JSON call; its own chat template
    writes ``parameters``, and SGLang reads that key or ``arguments``."""
    return "<|python_tag|>" + _json({"name": name, "parameters": arguments})


def _deepseekv3(name: str, arguments: dict[str, Any], index: int) -> str:
    """DeepSeek V3: ``function<｜tool▁sep｜>NAME`` then the arguments in a fenced json block."""
    call = f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{_json(arguments)}\n```<｜tool▁call▁end｜>"
    return f"<｜tool▁calls▁begin｜>{call}<｜tool▁calls▁end｜>"


def _deepseekv31(name: str, arguments: dict[str, Any], index: int) -> str:
    """DeepSeek V3.1: ``NAME<｜tool▁sep｜>{json}`` without the ``function`` prefix and the fence."""
    call = f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{_json(arguments)}<｜tool▁call▁end｜>"
    return f"<｜tool▁calls▁begin｜>{call}<｜tool▁calls▁end｜>"


def _deepseekv4(name: str, arguments: dict[str, Any], index: int) -> str:
    """DeepSeek V4's DSML after a blank line (what its encoder renders after the answer text, even an empty one):
    one ``<｜DSML｜parameter>`` per argument, ``string="true"`` and the raw value for a string, else JSON."""
    params = "".join(
        f'<｜DSML｜parameter name="{key}" string="{"true" if isinstance(value, str) else "false"}">'
        f"{value if isinstance(value, str) else _json(value)}</｜DSML｜parameter>\n"
        for key, value in arguments.items()
    )
    return f'\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n</｜DSML｜tool_calls>'


def _mistral(name: str, arguments: dict[str, Any], index: int) -> str:
    """Mistral's JSON-array call: ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}]``."""
    return "[TOOL_CALLS] " + _json([{"name": name, "arguments": arguments}])


def _kimi_k2(name: str, arguments: dict[str, Any], index: int) -> str:
    """Kimi K2: the call id is ``functions.NAME:INDEX``, INDEX counting calls across the conversation."""
    call = f"<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>{_json(arguments)}<|tool_call_end|>"
    return f"<|tool_calls_section_begin|>{call}<|tool_calls_section_end|>"


def _gpt_oss(name: str, arguments: dict[str, Any], index: int) -> str:
    """gpt-oss (harmony): a short analysis message, then a commentary message addressed to the tool.

    The generation prompt already holds ``<|start|>assistant``; SGLang's detector recognises a call only by
    ``<|start|>assistant<|channel|>commentary``, which the model writes itself after its analysis message.
    """
    analysis = f"<|channel|>analysis<|message|>I will call {name}.<|end|>"
    call = f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{_json(arguments)}"
    return f"{analysis}{call}<|call|>"


_FORMATS = (
    ToolCallFormat("qwen25", "<tool_call>", _hermes),
    ToolCallFormat("qwen3_coder", "<tool_call>\n<function=", _qwen3_coder),
    ToolCallFormat("llama3", "<|python_tag|>", _llama3),
    ToolCallFormat("deepseekv3", "<｜tool▁calls▁begin｜>", _deepseekv3),
    ToolCallFormat("deepseekv31", "<｜tool▁calls▁begin｜>", _deepseekv31),
    ToolCallFormat("deepseekv4", "<｜DSML｜tool_calls>", _deepseekv4),
    ToolCallFormat("mistral", "[TOOL_CALLS]", _mistral),
    ToolCallFormat("kimi_k2", "<|tool_calls_section_begin|>", _kimi_k2),
    ToolCallFormat("gpt-oss", "<|channel|>commentary to=", _gpt_oss),
)
_ALIASES = {"qwen": "qwen25", "hermes": "qwen25"}
"""Parser names SGLang maps to a detector that reads another name's text."""

_BY_NAME = {f.name: f for f in _FORMATS}
FORMATS: dict[str, ToolCallFormat] = {**_BY_NAME, **{alias: _BY_NAME[target] for alias, target in _ALIASES.items()}}
"""Every parser name the oracle can write for (aliases included)."""


def get_format(name: str) -> ToolCallFormat:
    """The format SGLang parser ``name`` reads.

    Raises:
        ConfigError: naming the format and the supported ones.
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"the built-in oracle cannot write tool calls in format {name!r}; supported: "
            f"{', '.join(sorted(FORMATS))} (a real model server, --sglang-url, takes any SGLang parser)"
        ) from None


def format_tool_call(name: str, arguments: dict[str, Any], fmt: str = "qwen25", index: int = 0) -> str:
    """A tool call written the way a model using SGLang parser ``fmt`` writes it (``index``: calls so far)."""
    return get_format(fmt).write(name, arguments, index)
