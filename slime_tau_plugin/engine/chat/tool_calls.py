"""Model text -> one action: tool call(s), a message to the user, or an invalid call fed back to the model.

Parsing is SGLang's own (``FunctionCallParser`` and, for thinking models, ``ReasoningParser``), so the
plugin reads tool calls exactly as an SGLang server would. SGLang drops a malformed ``<tool_call>``
block or an unknown tool with only a log line; we count the blocks ourselves, and a mismatch becomes an
``invalid`` action whose reason goes back to the model and into the sample's metadata. A reply that opens
another family's tool call (``<|python_tag|>`` under the ``qwen25`` parser) is ``invalid`` too, and warned about
once per parser: read as text it would be a silent reply to the user, and a run with the wrong
``tau_tool_call_parser`` would train on nothing.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from slime_tau_plugin.engine.chat.sglang_import import import_sglang_parsers
from slime_tau_plugin.engine.errors import ConfigError

ActionKind = Literal["tool_calls", "respond", "invalid"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One well-formed call of a known tool."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """What a model turn asks for."""

    kind: ActionKind
    content: str
    """Visible text (reasoning removed): the message to the user for ``respond``."""
    calls: tuple[ParsedCall, ...] = ()
    reasoning: str = ""
    reason: str = ""
    """Why the turn is ``invalid`` (fed back to the model)."""
    blocks: int = 0
    """Tool-call blocks the turn wrote (τ² would answer each, so each counts toward ``tau_max_errors``)."""


def check_parser_names(tool_call_parser: str, reasoning_parser: str | None = None) -> None:
    """Fail fast on a parser name SGLang does not know (before any episode runs).

    Raises:
        ConfigError: naming the bad value and the valid ones.
    """
    function_call_parser, _, _, reasoning_cls = import_sglang_parsers()
    known = getattr(function_call_parser, "ToolCallParserEnum", {})
    if tool_call_parser not in known:
        raise ConfigError(
            f"tau_tool_call_parser={tool_call_parser!r} is unknown; expected one of {', '.join(sorted(known))}"
        )
    reasoners = getattr(reasoning_cls, "DetectorMap", None)
    if reasoning_parser and reasoners is not None and reasoning_parser not in reasoners:
        raise ConfigError(
            f"tau_reasoning_parser={reasoning_parser!r} is unknown; expected one of {', '.join(sorted(reasoners))}"
        )


@functools.cache
def foreign_markers(parser: str) -> tuple[tuple[str, str], ...]:
    """``(opening marker, family)`` of every SGLang tool-call format whose marker is not ``parser``'s own.

    Read from SGLang's own table (``FunctionCallParser.ToolCallParserEnum``) and its detectors' ``bot_token``;
    a detector that cannot be built without arguments, or whose marker is empty or plain text (no ``<``, ``[`` or
    ``|``), names no marker. Aliases of one format (``qwen``/``qwen25``/``hermes``) share a marker and are not foreign.
    """
    function_call_parser, *_ = import_sglang_parsers()
    table = getattr(function_call_parser, "ToolCallParserEnum", {})
    own = _opening_marker(table.get(parser))
    markers: dict[str, str] = {}
    for name, detector_cls in sorted(table.items()):
        marker = _opening_marker(detector_cls)
        if len(marker) >= 5 and any(c in marker for c in "<[|") and not (own and (own in marker or marker in own)):
            markers.setdefault(marker, name)
    return tuple(sorted(markers.items()))


def _opening_marker(detector_cls: Any) -> str:
    try:
        return str(getattr(detector_cls(), "bot_token", "") or "").strip()
    except Exception:  # a detector that needs constructor arguments: no marker to look for
        return ""


class ToolCallParser:
    """Parses one model turn into a :class:`ParsedAction` for a fixed tool set."""

    def __init__(
        self,
        tools: Sequence[dict[str, Any]],
        parser: str = "qwen25",
        reasoning_parser: str | None = None,
        force_reasoning: bool | None = None,
    ) -> None:
        """``force_reasoning``: the generation prompt opened the reasoning (DeepSeek V4's ``<think>``), so the reply
        starts inside it; passed to SGLang's reasoning parser as its server does when thinking is requested."""
        check_parser_names(parser, reasoning_parser)
        function_call_parser, tool_cls, function_cls, reasoning_cls = import_sglang_parsers()
        self.tool_names = [t["function"]["name"] for t in tools]
        self._tools = list(tools)
        sgl_tools = [tool_cls(type="function", function=function_cls(**t["function"])) for t in tools]
        self._parser = function_call_parser(tools=sgl_tools, tool_call_parser=parser)
        detector = self._parser.detector
        start, end = getattr(detector, "tool_call_start_token", ""), getattr(detector, "tool_call_end_token", "")
        self._bot = getattr(detector, "bot_token", "") or start or "<tool_call>"  # start: Gemma 4's detector's name
        self._eot = getattr(detector, "eot_token", "") or end or "</tool_call>"
        self._xml = getattr(detector, "tool_call_prefix", None) == "<function="
        """Qwen3-Coder / Qwen3.5 / Qwen3.6 (``qwen3_coder``): XML calls; its detector keeps unknown tool names."""
        self.parser_name = parser
        self._foreign = foreign_markers(parser)
        self._warned: set[str] = set()
        self._reasoning = None
        if reasoning_parser:
            try:
                self._reasoning = reasoning_cls(
                    reasoning_parser, stream_reasoning=False, force_reasoning=force_reasoning
                )
            except ValueError as exc:
                raise ConfigError(f"tau_reasoning_parser={reasoning_parser!r} is unknown ({exc})") from exc

    def parse(self, text: str) -> ParsedAction:
        reasoning = ""
        if self._reasoning is not None:
            reasoning, text = self._reasoning.parse_non_stream(text)
        blocks = text.count(self._bot.strip())
        if blocks == 0:
            foreign = self._foreign_call(text)
            if foreign is not None:
                return self._invalid(text, reasoning, foreign[0], foreign[1])
            return ParsedAction("respond", text.strip(), reasoning=reasoning)
        try:
            normal, items = self._parser.parse_non_stream(text)
        except Exception as exc:  # SGLang raises on e.g. a JSON scalar inside the block
            return self._invalid(text, reasoning, f"the tool call could not be parsed ({type(exc).__name__})", blocks)
        calls: list[ParsedCall] = []
        for item in items:
            if item.name not in self.tool_names:  # SGLang's XML detector passes any name through
                reason = f"unknown tool {item.name!r}; available tools: {', '.join(self.tool_names)}"
                return self._invalid(text, reasoning, reason, blocks)
            try:
                arguments = json.loads(item.parameters) if item.parameters else {}
            except json.JSONDecodeError:
                return self._invalid(text, reasoning, f"arguments of {item.name!r} are not valid JSON", blocks)
            if not isinstance(arguments, dict):
                return self._invalid(
                    text,
                    reasoning,
                    f"arguments of {item.name!r} must be a JSON object, got {type(arguments).__name__}",
                    blocks,
                )
            calls.append(ParsedCall(item.name, arguments))
        if len(calls) < blocks:
            return self._invalid(text, reasoning, self._diagnose(text), blocks)
        return ParsedAction("tool_calls", normal.strip(), tuple(calls), reasoning)

    def _foreign_call(self, text: str) -> tuple[str, int] | None:
        """(reason, blocks) when ``text`` opens another family's tool call; warns once per family and parser."""
        for marker, family in self._foreign:
            count = text.count(marker)
            if not count:
                continue
            if family not in self._warned:
                self._warned.add(family)
                from slime_tau_plugin.engine.chat.tool_call_family import reply_family  # once per marker: slow, rare

                family = reply_family(text, self._tools, exclude=self.parser_name) or family
                logger.warning(
                    "a model reply opens a %s tool call (%r) but tau_tool_call_parser=%r (rollout: --tool-call-parser):"
                    " such replies count as parse errors; set the parser of the policy's model family",
                    family,
                    marker,
                    self.parser_name,
                )
            reason = (
                f"the tool call uses another format ({marker!r}); call tools exactly in the format the system "
                "prompt gives"
            )
            return reason, count
        return None

    def _invalid(self, text: str, reasoning: str, reason: str, blocks: int) -> ParsedAction:
        return ParsedAction("invalid", text.strip(), reasoning=reasoning, reason=reason, blocks=blocks)

    def _diagnose(self, text: str) -> str:
        """Say what is wrong with the first block SGLang dropped, in words the model can act on."""
        pattern = re.escape(self._bot.strip()) + r"(.*?)(?:" + re.escape(self._eot.strip()) + r"|$)"
        if self._xml:
            return (
                "a tool call could not be parsed; write <tool_call>, then <function=NAME>, one "
                "<parameter=KEY>VALUE</parameter> per argument, </function> and </tool_call>"
            )
        for body in re.findall(pattern, text, flags=re.S):
            try:
                obj = json.loads(body.strip())
            except json.JSONDecodeError:
                return f"a tool call is not valid JSON: {body.strip()[:200]!r}"
            name = obj.get("name") if isinstance(obj, dict) else None
            if not isinstance(name, str):
                return 'a tool call must be a JSON object {"name": ..., "arguments": {...}}'
            if name not in self.tool_names:
                return f"unknown tool {name!r}; available tools: {', '.join(self.tool_names)}"
        return "a tool call could not be parsed; use the exact format given in the system prompt"
