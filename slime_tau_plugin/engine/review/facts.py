"""The facts a customer states that can be checked by string: identifiers, amounts, zip codes, names.

A fact is *grounded* when the customer could know it: it occurs in its instructions, earlier in the conversation
(any role: the agent may have read it out) or in what its own tools showed it (τ² telecom's phone). Each kind has
one pattern and one normal form, so ``#W2378156`` and ``W2378156`` or ``$1,204.50`` and ``1204.5`` are one fact.
Patterns are narrow on purpose: a fact the patterns miss costs recall, a pattern that fires on plain words costs
precision, and the review ships only checks whose precision was measured (benchmarks/user_review.md).
Imports nothing from the package.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Fact", "FactKind", "Grounding", "stated_facts"]


class FactKind(str, enum.Enum):
    EMAIL = "email"
    USER_ID = "user id"
    ORDER_ID = "order id"
    RESERVATION_ID = "reservation id"
    PAYMENT_ID = "payment method"
    ITEM_ID = "item id"
    PHONE = "phone number"
    ZIP = "zip code"
    AMOUNT = "amount"
    NAME = "name"


_PATTERNS: tuple[tuple[FactKind, re.Pattern[str]], ...] = (
    (FactKind.EMAIL, re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    (FactKind.PAYMENT_ID, re.compile(r"\b(?:credit_card|gift_card|paypal|certificate)_\d{4,}\b")),
    (FactKind.USER_ID, re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")),
    (FactKind.ORDER_ID, re.compile(r"#?\bW\d{7}\b")),
    (FactKind.ITEM_ID, re.compile(r"(?<![\d.,$-])\b\d{10}\b(?![\d-])")),
    (FactKind.PHONE, re.compile(r"(?<!\d)\(?\d{3}\)?[ -]\d{3}-\d{4}\b")),
    (FactKind.RESERVATION_ID, re.compile(r"\b(?=[A-Z0-9]{6}\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b")),
    (FactKind.ZIP, re.compile(r"(?<![\d.,$#-])\b\d{5}\b(?!-|[.,]?\d)")),
    (FactKind.AMOUNT, re.compile(r"\$\s?\d[\d,]*(?:\.\d{1,2})?")),
)
_NAME = re.compile(r"\b(?:[Mm]y name is|I am|I'm|[Tt]his is)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_NOT_NAMES = frozenset({"Hi", "Hello", "Thanks", "Thank", "Yes", "No", "Sure", "Okay", "Please", "Sorry", "Also"})


@dataclass(frozen=True, slots=True)
class Fact:
    kind: FactKind
    text: str
    """As the customer wrote it."""

    @property
    def key(self) -> str:
        """The normal form grounding compares (lower case, no ``#``/``$``/thousands commas/spaces)."""
        text = self.text.lower().lstrip("#$ ").replace(",", "")
        if self.kind is FactKind.PHONE:
            return re.sub(r"\D", "", text)
        if self.kind is FactKind.AMOUNT:
            return _amount(text)
        if self.kind is FactKind.NAME:
            return " ".join(text.split())
        return text


def stated_facts(text: str) -> list[Fact]:
    """The checkable facts in one customer message, each once, in the order they appear."""
    found: list[tuple[int, Fact]] = []
    taken: list[range] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            span = range(match.start(), match.end())
            if any(span.start < t.stop and t.start < span.stop for t in taken):
                continue  # a zip inside a phone number, an item id inside a payment id
            taken.append(span)
            found.append((match.start(), Fact(kind, match.group(0))))
    for match in _NAME.finditer(text):
        words = [w for w in match.group(1).split() if w not in _NOT_NAMES]
        if len(words) >= 2:
            found.append((match.start(1), Fact(FactKind.NAME, " ".join(words[:3]))))
    seen: set[tuple[FactKind, str]] = set()
    out: list[Fact] = []
    for _, fact in sorted(found, key=lambda pair: pair[0]):
        if (fact.kind, fact.key) not in seen:
            seen.add((fact.kind, fact.key))
            out.append(fact)
    return out


class Grounding:
    """What the customer may know so far; grows as the conversation goes on.

    Lazy: a text is normalised only when a fact is first asked about after it was added, so a conversation whose
    customer states nothing checkable (most) costs nothing past the append.
    """

    def __init__(self, sources: Iterable[str] = ()) -> None:
        self._pending: list[str] = list(sources)
        self._texts: list[str] = []
        self._digits: list[str] = []
        self._amounts: set[str] = set()

    def add(self, text: str) -> None:
        self._pending.append(text)

    def _absorb(self) -> None:
        for text in self._pending:
            low = text.lower().replace(",", "")
            self._texts.append(" ".join(low.split()))
            self._digits.append(re.sub(r"\D+", "", low))
            self._amounts.update(_amount(m.group(0)) for m in _NUMBER.finditer(low))
        self._pending.clear()

    def knows(self, fact: Fact) -> bool:
        self._absorb()
        key = fact.key
        if fact.kind is FactKind.AMOUNT:
            return key in self._amounts
        if fact.kind is FactKind.PHONE:
            return any(key in digits for digits in self._digits)
        if fact.kind is FactKind.ORDER_ID:
            key = key.lstrip("#")
        return any(key in text for text in self._texts)


def _amount(text: str) -> str:
    """``"1204.50"`` and ``"1204.5"`` and ``"1204"`` as one key (cents kept when not zero)."""
    try:
        value = float(text.lstrip("$ ").replace(",", ""))
    except ValueError:
        return text
    return f"{value:.2f}".rstrip("0").rstrip(".")
