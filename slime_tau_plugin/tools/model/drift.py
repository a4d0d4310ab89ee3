"""Text drift: does the stored token stream decode to the chat template's rendering of the stored messages?

Compared as text, not ids: a model's own ids are often not the canonical tokenization of their text (a random
model's almost never are), and that is correct (token-in, token-out never re-tokenizes them). What the text
comparison catches is glue the trajectory got wrong: a missing newline after an end-of-turn, a wrong role header,
a tool result rendered differently from the template. Templates that rewrite history (Qwen3 drops or inserts
``<think>`` blocks in earlier turns) drift by design; ``verify`` reports drift without failing on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jinja2 import TemplateError

from slime_tau_plugin.engine.chat.templates import ChatTemplate


def text_drift(template: ChatTemplate, tokens: Sequence[int], messages: Any, tools: Any, prompt_len: int) -> int | None:
    """The response position of the first token whose text departs from the rendering (-1: in the prompt), or None.

    The stored stream may stop before the rendering does (the final user message, the glue after the last
    end-of-turn), so only a departure counts. Returns None when ``messages`` were not recorded either.
    """
    if not isinstance(messages, list) or not messages:
        return None
    try:
        rendered = template.render(messages, add_generation_prompt=False, tools=tools or None)
    except (TemplateError, TypeError, ValueError, KeyError):  # cannot render what was stored: nothing to compare
        return None
    decode = template.tokenizer.decode
    ids = list(tokens)
    if rendered.startswith(decode(ids, skip_special_tokens=False)):
        return None
    low, high = 0, len(ids)  # decode(ids[:low]) is a prefix of the rendering, decode(ids[:high]) is not
    while high - low > 1:
        middle = (low + high) // 2
        if rendered.startswith(decode(ids[:middle], skip_special_tokens=False)):
            low = middle
        else:
            high = middle
    return max(high - 1 - prompt_len, -1)
