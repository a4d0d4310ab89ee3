"""Whether the customer could know a fact it stated: compared in normal form, not as written.

A fact is *grounded* when its normal form is in what the customer has seen: its instructions, what its own tools
showed it, and everything any role said before (the agent may read a value out first). Normal forms, so a
paraphrase of a known value is still known:

- a number: its digits (``(555) 123-2002`` is ``555-123-2002``), a card "ending in 1234" or a phone without its
  area code (4+ digits inside a known number), its value (``$1,204.50`` = ``1204.5``; ``2.0 GB`` = ``2 GB``;
  ``two`` = ``2``), a date in any written form (``May 15, 2024`` = ``2024-05-15`` = ``05/15/2024``; a date
  without its year matches on month and day), a time (``2pm`` = ``14:00``); a run of several numbers (a list) is
  grounded when each of them is;
- an email, case-folded; a code, a name or a value word: each of its words is a known word (case, punctuation,
  plural and possessive folded).

Lazy: a text is absorbed only when a fact is first asked about after it was added, so a conversation whose
customer states nothing costs nothing past the append. Imports only ``facts``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slime_tau_plugin.engine.review.facts import MONTHS, NUMBER_WORDS, Fact, FactKind, number_spans, words_of

__all__ = ["Grounding", "appears_in"]

_MONTH_NO = {m: i + 1 for i, m in enumerate(MONTHS.replace("|sept", "").split("|"))}
_PART = re.compile(r"[#$(]?[A-Za-z_]*\d[\w.,:/'-]*\)?", re.I)
_ISO = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_SLASH = re.compile(r"(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?")
_WRITTEN = re.compile(rf"\b({MONTHS})[a-z]*\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?", re.I)
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({MONTHS})[a-z]*\.?(?:,?\s+(\d{{4}}))?", re.I)
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?(?::\d{2})?\s?([ap])?\.?m?\b", re.I)
MIN_INNER_DIGITS = 4
"""A number of this many digits is grounded inside a longer known one (a card's last four, a local phone)."""


def digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def value(text: str) -> str | None:
    """A number's value as a key (``"$1,204.50"`` -> ``"1204.5"``), None when it is not one number."""
    bare = re.sub(r"(?<=\d)(?:st|nd|rd|th)\b", "", text.lower().strip("#$() ")).replace(",", "")
    bare = re.sub(r"\s?[a-z]+$", "", bare)  # a unit: 2.0 GB, 10ft
    try:
        number = float(bare)
    except ValueError:
        return None
    return f"{number:.2f}".rstrip("0").rstrip(".")


def dates(text: str) -> set[tuple[int, int, int]]:
    """(month, day, year or 0) for each date written in ``text``."""
    out: set[tuple[int, int, int]] = set()
    for y, mo, d in _ISO.findall(text):
        out.add((int(mo), int(d), int(y)))
    for mo, d, y in _SLASH.findall(_ISO.sub(" ", text)):
        year = int(y) + (2000 if len(y) == 2 else 0) if y else 0
        out.add((int(mo), int(d), year))
    for mo, d, y in _WRITTEN.findall(text):
        out.add((_MONTH_NO[mo.lower()[:3]], int(d), int(y or 0)))
    for d, mo, y in _DAY_MONTH.findall(text):
        out.add((_MONTH_NO[mo.lower()[:3]], int(d), int(y or 0)))
    return {(m, d, y) for m, d, y in out if 1 <= m <= 12 and 1 <= d <= 31}


def times(text: str) -> set[int]:
    """Minutes after midnight for each ``h:mm`` or ``h am/pm`` in ``text``."""
    out = set()
    for h, m, half in _TIME.findall(text):
        if not m and not half:
            continue
        hour = int(h) % 12 + (12 if half.lower() == "p" else 0) if half else int(h)
        out.add(hour * 60 + int(m or 0))
    return out


def appears_in(fact: Fact, text: str) -> bool:
    """``fact`` in ``text`` in normal form (a later agent tool call carries it)."""
    if fact.kind is FactKind.NUMBER:
        key = digits(fact.text)
        return len(key) >= 2 and key in digits(text)
    said = set(words_of(text))
    return bool(words_of(fact.text)) and all(w in said for w in words_of(fact.text))


class Grounding:
    """What the customer may know so far; grows as the conversation goes on."""

    def __init__(self, sources: Iterable[str] = ()) -> None:
        self._pending: list[str] = list(sources)
        self._words: set[str] = set()
        self._lower: list[str] = []
        self._alnum: list[str] = []
        self._digit_runs: set[str] = set()
        self._values: set[str] = set()
        self._dates: set[tuple[int, int, int]] = set()
        self._times: set[int] = set()

    def add(self, text: str) -> None:
        self._pending.append(text)

    def _absorb(self) -> None:
        for text in self._pending:
            low = text.lower()
            self._lower.append(low)
            self._alnum.append(re.sub(r"[^a-z0-9]", "", low))
            self._words.update(words_of(text))
            self._values.update(n for w, n in NUMBER_WORDS.items() if w in self._words)
            for number in number_spans(text):
                self._add_number(number)
            self._dates |= dates(text)
            self._times |= times(text)
        self._pending.clear()

    def _add_number(self, text: str) -> None:
        for part in [text, *_PART.findall(text)]:
            if digits(part):
                self._digit_runs.add(digits(part))
            number = value(part)
            if number is not None:
                self._values.add(number)

    def knows(self, fact: Fact) -> bool:
        self._absorb()
        if fact.kind is FactKind.NUMBER:
            return self._knows_number(fact.text)
        if fact.kind is FactKind.EMAIL:
            return any(fact.text.lower() in low for low in self._lower)
        words = words_of(fact.text)
        return all(w in self._words for w in words)

    def _knows_number(self, text: str) -> bool:
        if self._one_number(text):
            return True
        found = dates(text)
        if found and all(self._knows_date(d) for d in found):
            return True
        if times(text) and times(text) <= self._times:
            return True
        parts = _PART.findall(text)
        return len(parts) > 1 and all(self._one_number(p) or self._knows_date_text(p) for p in parts)

    def _one_number(self, text: str) -> bool:
        text = NUMBER_WORDS.get(text.lower(), text)
        key = digits(text)
        if key in self._digit_runs or (value(text) or "\0") in self._values:
            return True
        if len(key) >= MIN_INNER_DIGITS and any(key in run for run in self._digit_runs):
            return True
        alnum = re.sub(r"[^a-z0-9]", "", text.lower())
        return len(alnum) >= MIN_INNER_DIGITS and any(alnum in known for known in self._alnum)

    def _knows_date(self, date: tuple[int, int, int]) -> bool:
        month, day, year = date
        return any(m == month and d == day and (not year or not y or y == year) for m, d, y in self._dates)

    def _knows_date_text(self, text: str) -> bool:
        found = dates(text)
        return bool(found) and all(self._knows_date(d) for d in found)
