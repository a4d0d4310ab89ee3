"""Chat-template continuation: prompt ids, end-of-turn ids and the exact continuation after a model turn.

The continuation is what the chat template writes between the model's end-of-turn token and the
next generation: template glue (``"\\n"`` after ``<|im_end|>`` for Qwen), the new tool/user
message(s) and the next generation prompt. It is computed from the tokenizer's own template in one of two
modes, picked once per template and tool set by ``template_probe.probe_template``:

- ``anchored``: render a fixed placeholder assistant turn followed by the new messages, so a
  history-rewriting template (Qwen3 drops old ``<think>`` blocks) cannot disturb it;
- ``rendered_history``: for templates that carry state across turns (DeepSeek V3), render the whole
  conversation and take the text after the model's end-of-turn.

The arithmetic itself is ``template_text.TemplateText``; this module adds the probe's verdict. Either way only the
new text is tokenized: the model's own ids are never re-rendered or re-tokenized. This module knows nothing about
HTTP, τ or slime.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.chat.template_probe import (
    Fidelity,
    ProbeResult,
    check_gemma4,
    check_harmony,
    probe_template,
    tools_missing,
)
from slime_tau_plugin.engine.chat.template_text import (
    TemplateMode,
    TemplateText,
    default_tokenizer_dir,
    load_tokenizer,
    refuse,
)
from slime_tau_plugin.engine.choices import ToolsInPrompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["ChatTemplate", "TemplateMode", "default_tokenizer_dir", "load_tokenizer"]

logger = logging.getLogger(__name__)
_LOGGED: set[str] = set()
"""Probe lines already logged by this process (the CLI builds a template for its check, its server, its episodes)."""


class ChatTemplate(TemplateText):
    """A tokenizer's chat template, probed once, turned into token-id arithmetic for multi-turn rollouts."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        tools: Sequence[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
        system_text: str | None = None,
    ) -> None:
        """Refuse harmony, build the arithmetic, then probe it (``template_probe``) with ``tools``.

        ``system_text``: ``tools`` as text for the system message (``tau_tools_in_prompt: system``).

        Raises:
            ConfigError: one line naming the tokenizer: no chat template, harmony (gpt-oss), a template that
                cannot render a τ conversation, closes no assistant turn or leaves ``tools`` out of the prompt; Gemma 4.
        """
        name = str(getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__)
        check_harmony(tokenizer, name)
        check_gemma4(tokenizer, name)
        super().__init__(tokenizer, tools, template_kwargs, system_text)
        probed = TemplateText(tokenizer, tools, template_kwargs, system_text)  # a complete one
        self.probe: ProbeResult = probe_template(probed)
        if missing := tools_missing(self):
            shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            raise refuse(
                self.name,
                f"its chat template leaves {len(missing)} of {len(self.schemas)} tool schemas out of the prompt "
                f"({shown}): a model trained on it never sees the tools it is scored on; use a chat template that "
                "renders tools=, or set tau_tools_in_prompt to system to put them in the system message",
            )
        self.mode = self.probe.mode
        new = [{"role": "tool", "content": "T"}, {"role": "user", "content": "U2"}]
        if self.tools and self._anchored_text(new) == self._anchored_text(new, tools=None):
            self._continuation_tools = None  # proven not to change what follows a turn: skip rendering schemas
        line = f"chat template of {self.name}: {self.probe.describe()}"
        if line not in _LOGGED:  # one line per template and probe result, however many tool sets build one
            _LOGGED.add(line)
            (logger.warning if self.probe.fidelity is Fidelity.UNSAFE_BOUNDARY else logger.info)(line)

    @property
    def tools_in(self) -> ToolsInPrompt:
        """How the tool schemas reach the prompt (``system_text`` set: in the system message)."""
        return ToolsInPrompt.TEMPLATE if self.system_text is None else ToolsInPrompt.SYSTEM
