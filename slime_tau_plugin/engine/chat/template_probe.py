"""Probe a chat template once, when it is loaded: can it render a τ conversation, and which continuation is exact.

Why: :class:`~slime_tau_plugin.engine.chat.templates.ChatTemplate` computes the ids that follow a model turn without
re-tokenizing the model's ids. The cheap way (*anchored*: a placeholder assistant turn + the new messages) is
exact only for templates that carry no state across turns. DeepSeek V3's does: a tool output after an earlier
tool round renders as ``\\n<｜tool▁output▁begin｜>`` without re-opening ``<｜tool▁outputs▁begin｜>``, which an
anchored render cannot see. Such templates get *rendered-history* continuations: the whole conversation is
rendered and only the text after the model's end-of-turn is tokenized.

The probe renders a conversation with several tool rounds (one with two tool outputs) and user turns
(reasoning in every model turn for a ``<think>`` template) whole, and as prompt + model ids + continuations
both ways; the mode is ``anchored`` when both ways agree on every continuation, else ``rendered_history``.
A template that cannot render the conversation (raises on the tool role or on non-alternating roles, drops
tool or user messages) or is OpenAI's harmony format is refused with one line naming the tokenizer.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.chat.template_text import TemplateMode, TemplateText, refuse
from slime_tau_plugin.engine.errors import ConfigError

__all__ = [
    "PROBE_TOOLS",
    "Fidelity",
    "ProbeResult",
    "TemplateMode",
    "check_gemma4",
    "check_harmony",
    "probe_template",
    "refuse",
    "tools_missing",
]

Message = dict[str, Any]


class Fidelity(str, enum.Enum):
    """How the held ids compare with ``tokenize(render(conversation))`` on the probe."""

    EXACT = "exact"
    """Equal after every turn."""
    REWRITES_HISTORY = "rewrites_history"
    """Each continuation is the template's own text at its moment, but re-rendering the finished conversation
    changes earlier text (Qwen3 hides old ``<think>`` blocks): the held ids are what the model saw
    (docs/ARCHITECTURE.md, Invariants)."""
    UNSAFE_BOUNDARY = "unsafe_boundary"
    """The end-of-turn is plain text that merges with what follows: continuations are tokenized on their own
    (counted per sample in ``template_fallbacks``)."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    mode: TemplateMode
    fidelity: Fidelity
    exact_prefixes: int
    """Probe prefixes (the prompt, then after each turn) whose held ids equal the whole render."""
    prefixes: int

    def describe(self) -> str:
        return f"{self.mode.value}, {self.fidelity.value} ({self.exact_prefixes}/{self.prefixes} renders exact)"


_HARMONY_TOKENS = ("<|channel|>", "<|call|>", "<|return|>")
_THINK = "<think>\n{}\n</think>\n\n"
_OPENED = "{}\n</think>\n\n"
"""A turn whose generation prompt already opened ``<think>\\n`` (Qwen3.5/3.6): the model writes the rest."""
_CALL = '<tool_call>\n{{"name": "get_order", "arguments": {{"id": "{}"}}}}\n</tool_call>'
PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order (template probe).",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
]
"""The tool set the probe uses when the template is checked before any episode (``resources.py``)."""


def check_harmony(tokenizer: Any, name: str) -> None:
    """Refuse OpenAI's harmony format (gpt-oss) before looking at its template.

    Raises:
        ConfigError: the vocabulary has harmony's ``<|channel|>``, ``<|call|>`` and ``<|return|>``.
    """
    added = {tok.content for tok in getattr(tokenizer, "added_tokens_decoder", {}).values()}
    if all(token in added for token in _HARMONY_TOKENS):
        missing = "" if getattr(tokenizer, "chat_template", None) else " (and this tokenizer ships no chat template)"
        raise refuse(
            name,
            "it uses OpenAI's harmony format (gpt-oss): a final answer ends with the stop token <|return|>, which "
            "harmony replaces with <|end|> once the turn is history (openai/harmony docs/format.md), so the ids the "
            f"model sampled, held unchanged, can never equal the template's rendering of the conversation{missing}",
        )


_GEMMA4_TOKENS = ("<|turn>", "<turn|>", "<|tool_call>", "<|tool_response>")


def check_gemma4(tokenizer: Any, name: str) -> None:
    """Refuse Gemma 4 before looking at its template (the vocabulary has its turn and tool tokens).

    Why: Gemma 4's tool protocol keeps the tool's answer inside the model's turn (``<|tool_call>…<tool_call|>``, then
    ``<|tool_response>…<tool_response|>`` and the model goes on, with no new turn), while τ's tool results are
    messages of their own; and no Gemma 4 tokenizer is published in a package registry, so no test here could hold
    its ids against its template (docs/templates.md).

    Raises:
        ConfigError: the vocabulary has Gemma 4's ``<|turn>``, ``<turn|>``, ``<|tool_call>`` and ``<|tool_response>``.
    """
    added = {tok.content for tok in getattr(tokenizer, "added_tokens_decoder", {}).values()}
    if all(token in added for token in _GEMMA4_TOKENS):
        raise refuse(
            name,
            "it is Gemma 4, which is not supported: its tool protocol answers a call inside the model's own turn "
            "(<|tool_call>…<tool_call|><|tool_response>…<tool_response|>, then the model goes on), not as the tool "
            "messages τ sends, and no Gemma 4 tokenizer is published in a package registry to prove its ids exact",
        )


def probe_conversation(thinking: bool, opened: bool = False) -> tuple[list[Message], list[tuple[str, list[Message]]]]:
    """The opening and the turns (model text, new messages) the probe renders.

    ``opened``: the generation prompt ends with ``<think>\\n``, so the model's text starts inside the reasoning.
    """
    think = (_OPENED if opened else _THINK).format if thinking else (lambda _: "")
    tool = lambda text: {"role": "tool", "name": "get_order", "content": text}  # noqa: E731
    opening = [
        {"role": "system", "content": "You are a shop agent (probe system)."},
        {"role": "user", "content": "hello, where is order ab? (probe user 1)"},
    ]
    turns = [
        (think("look it up") + _CALL.format("ab"), [tool("ab: shipped (probe tool 1)"), tool("eta 2d (probe tool 2)")]),
        (think("check again") + _CALL.format("ab"), [tool("still shipped (probe tool 3)")]),
        (think("answer") + "Order ab is shipped.", [{"role": "user", "content": "thanks. and cd? (probe user 2)"}]),
        (think("look up cd") + _CALL.format("cd"), [tool("cd: pending (probe tool 4)")]),
        (think("answer") + "cd is pending.", [{"role": "user", "content": "ok, bye (probe user 3)"}]),
    ]  # fmt: skip
    return opening, turns


def opens_thinking(ct: TemplateText, messages: Sequence[Message]) -> bool:
    """Whether the generation prompt itself opens the reasoning (``...<|im_start|>assistant\\n<think>\\n``, or
    DeepSeek V4's ``<｜Assistant｜><think>``)."""
    return ct.render(messages, add_generation_prompt=True).rstrip("\n").endswith("<think>")


def probe_template(ct: TemplateText) -> ProbeResult:
    """Render the probe conversation whole and both ways; pick the mode and measure fidelity.

    Raises:
        ConfigError: the template cannot render a τ conversation.
    """
    switch = ct.template_kwargs.get("enable_thinking", ct.template_kwargs.get("thinking"))  # Qwen's, DeepSeek's
    thinking = "<think>" in str(ct.tokenizer.chat_template) and switch is not False
    opening, _ = probe_conversation(thinking)
    opening, turns = probe_conversation(thinking, opens_thinking(ct, opening))
    conversation = [*opening]
    for text, new in turns:
        conversation += [{"role": "assistant", "content": text}, *new]
    _check_renders(ct, conversation)
    anchored = _roll(ct, opening, turns, TemplateMode.ANCHORED)
    try:
        history = _roll(ct, opening, turns, TemplateMode.RENDERED_HISTORY)
    except ConfigError:  # the end-of-turn cannot be counted in the history's render: anchoring is all there is
        history = anchored
    same = [a[1] for a in anchored.turns] == [h[1] for h in history.turns]
    mode = TemplateMode.ANCHORED if same else TemplateMode.RENDERED_HISTORY
    held = anchored if same else history
    renders = [ct.encode(ct.render(held.messages[k], add_generation_prompt=True)) for k in held.ks]
    exact = sum(held.prefix(k) == ids for k, ids in zip(held.ks, renders, strict=True))
    if exact == len(renders):
        fidelity = Fidelity.EXACT
    elif held.unsafe:
        fidelity = Fidelity.UNSAFE_BOUNDARY
    else:  # every continuation is the template's own text of its moment; re-rendering changed earlier text
        fidelity = Fidelity.REWRITES_HISTORY
    return ProbeResult(mode, fidelity, exact, len(held.ks))


@dataclass(slots=True)
class _Held:
    prompt: list[int]
    turns: list[tuple[list[int], list[int]]]
    """(model ids, continuation ids) per turn."""
    messages: list[list[Message]]
    """The conversation after k turns, k = 0..len(turns)."""
    unsafe: int = 0

    @property
    def ks(self) -> range:
        return range(len(self.messages))

    def prefix(self, k: int) -> list[int]:
        return [*self.prompt, *(i for model, cont in self.turns[:k] for i in (*model, *cont))]


def _roll(
    ct: TemplateText, opening: list[Message], turns: Sequence[tuple[str, list[Message]]], mode: TemplateMode
) -> _Held:
    """Hold ids the way the engine does: the prompt, then per turn the model's ids and the continuation."""
    messages = list(opening)
    held = _Held(ct.prompt_ids(messages), [], [list(messages)])
    for text, new in turns:
        model = [*ct.encode(text), *ct.eot_ids]
        messages.append({"role": "assistant", "content": ct.decode(model)})
        tail = ct.continuation_text(new, messages, mode=mode)
        cont = ct.tokenize_continuation(tail)
        if cont is None:
            held.unsafe += 1
            cont = ct.encode(tail)
        messages.extend(new)
        held.turns.append((model, cont))
        held.messages.append(list(messages))
    return held


def tools_missing(ct: TemplateText) -> list[str]:
    """The episode's tools whose name or parameter names the template does not put in the prompt.

    Renders a short opening with the template's tools (or its system text) and bare; every tool's name and
    parameter names must occur more often in the first. A template that ignores ``tools`` misses them all.
    """
    if not ct.schemas:
        return []
    opening = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    shown = ct.render(opening, add_generation_prompt=True)
    bare = ct.tokenizer.apply_chat_template(
        opening, tools=None, tokenize=False, add_generation_prompt=True, **ct.template_kwargs
    )
    missing = []
    for tool in ct.schemas:
        function = tool.get("function") or tool
        names = [function.get("name") or "", *((function.get("parameters") or {}).get("properties") or {})]
        if any(shown.count(name) <= bare.count(name) for name in names if name):
            missing.append(str(function.get("name")))
    return missing


def _check_renders(ct: TemplateText, conversation: list[Message]) -> None:
    """Refuse a template that raises on (or silently drops) the system, user or tool messages of a τ conversation."""
    try:
        text = ct.render(conversation, add_generation_prompt=True)
    except Exception as exc:  # jinja's TemplateError (raise_exception) and friends
        raise refuse(
            ct.name, f"its chat template cannot render a τ conversation (system, user, assistant, tool, tool...): {exc}"
        ) from exc
    for message in conversation:
        if message["role"] != "assistant" and message["content"] not in text:
            raise refuse(ct.name, f"its chat template drops {message['role']!r} messages from a τ conversation")
