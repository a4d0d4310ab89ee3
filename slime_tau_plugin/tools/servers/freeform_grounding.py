"""What the freeform customer (``customer_faults_freeform.py``) could know, and whether a value is outside it.

An invented fact is only a fault when the customer was never given it: not in its instructions (the system
prompt), not in its own tool results, not in anything the agent said, not in what it said itself. This module is
the generator's own grounding test, written apart from the review's checks (it must not share their blind spots):
a value is tested in every *form* it could be grounded by — its digits inside any number of the context (so
``nine four one zero seven`` is present when ``94107`` is), a small number as a whole number or its word, any
other text letter-and-digit-only inside the context's letters-and-digits. Substring tests err on the side of
"present": a value that might be grounded is never injected (the generator draws another), so the ground truth
never calls a grounded value invented.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Context", "NUMBER_WORDS", "ORDINAL_WORDS", "context_of", "spell_digits"]

NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
ORDINAL_WORDS = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
    "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
).split()
_NUMBER = re.compile(r"\d+(?:[-.,/ ]?\d+)*")
_WORD = re.compile(r"[a-z]+")


def spell_digits(digits: str, sep: str = " ") -> str:
    """``"0417"`` -> ``"zero four one seven"``: how a customer reads a number out digit by digit."""
    return sep.join(NUMBER_WORDS[int(d)] for d in digits)


def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@dataclass(frozen=True)
class Context:
    """Everything the customer saw or said before its next message, in the forms a value is tested against."""

    text: str
    numbers: frozenset[str]
    """The digits of every number in the context, separators dropped (``555-123-4567`` -> ``5551234567``)."""
    words: frozenset[str]
    flat: str
    """The context lower-cased with everything but letters and digits dropped."""

    def absent(self, forms: Iterable[str]) -> bool:
        """True when none of a value's forms is in the context (each form: digits, or any other text)."""
        return all(self._form_absent(form) for form in forms)

    def _form_absent(self, form: str) -> bool:
        flat = _alnum(form)
        if not flat:
            return True
        if flat.isdigit():
            if len(flat) <= 2:  # a day, a count: a whole number or its word, never a digit inside an id
                n = int(flat)
                words = {NUMBER_WORDS[n], ORDINAL_WORDS[n]} if n < len(NUMBER_WORDS) else set()
                return all(int(num) != n for num in self.numbers if len(num) <= 4) and not (words & self.words)
            return not any(flat in num for num in self.numbers)
        digits = re.sub(r"\D", "", flat)
        if len(digits) >= 3 and not self._form_absent(digits):
            return False
        return flat not in self.flat


def context_of(messages: list[dict[str, Any]], own_reply: str = "") -> Context:
    """The customer's grounding: its system prompt (instructions), every message of the conversation from its
    side (the agent's words, its own tool calls and results, its own words) and the reply it was about to send."""
    parts: list[str] = [own_reply]
    for m in messages:
        parts.append(str(m.get("content") or ""))
        for call in m.get("tool_calls") or []:
            parts.append(json.dumps(call, ensure_ascii=False))
    text = "\n".join(parts)
    numbers = frozenset(re.sub(r"\D", "", n) for n in _NUMBER.findall(text))
    return Context(text, numbers, frozenset(_WORD.findall(text.lower())), _alnum(text))
