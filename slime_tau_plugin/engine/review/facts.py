"""The fact-like spans a customer message states, found by their make-up rather than one pattern per shape.

A real customer states a card ending, a phone number, an amount, a date, a name, a city or an item's colour in
whatever words it likes. So spans are found by what they are built of, and any new shape of the same stuff is
covered by construction:

- **numbers**: any run of digit-bearing tokens (``#W2378156``, ``555-123-2002``, ``$1,204.50``, ``May 15, 2024``,
  ``10:30 am``, ``credit_card_9513926``, ``2.0 GB``, ``3``), with a month word, am/pm or a unit beside it;
- **emails**: any token with an ``@``;
- **codes**: a token with an underscore, 3-8 capitals, a US state's or a size's two (``basic_economy``,
  ``JFK``, ``CA``, ``XL``);
- **names**: a run of capitalised words that is not a sentence's first word alone (``Yusuf Rossi``,
  ``San Francisco``, ``Main Street``), or the words after "my name is" / "call me" in any case;
- **counts**: a number word from two to twelve or a ten (``two``, ``twelve``, ``forty``);
- **values**: a word of τ's databases' value vocabulary (item options, names, cities, cabins, plans:
  ``tau_values.txt``, built by ``scripts/build_review_values.py``), e.g. ``blue``, ``leather``, ``Denver``.

``grounding.py`` decides which of them the customer could know. Imports nothing from the package.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["NUMBER_WORDS", "Fact", "FactKind", "number_spans", "stated_facts", "value_words", "words_of"]


class FactKind(str, enum.Enum):
    NUMBER = "number"
    EMAIL = "email"
    CODE = "code"
    NAME = "name"
    VALUE = "value"


MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec"
_MONTH = rf"(?:{MONTHS})[a-z]*\.?"
_UNITS = (
    r"inch(?:es)?|hours?|minutes?|days?|weeks?|months?|years?|lit(?:er|re)s?|cups?|bar|ft|feet|foot|lbs?|pounds?"
    r"|gb|tb|mb|mah|ml|mm|cm|kg|g|w|watts?|mp|degrees?|pieces?|pcs|items?|bags?|passengers?|nights?|usd|dollars?"
)
"""A unit right after a number is part of it ("34 inch", "1.5 liters", "2 bags")."""
_NUM_TOKEN = r"[#$(]?[A-Za-z_]*\d[\w.,:/'-]*\)?"
_NUMBERS = re.compile(
    rf"(?<![\w#$(])(?=[\w#$(])(?:{_MONTH}\s+)?{_NUM_TOKEN}(?:(?:\s|\s?[-/]\s?|,\s)(?:{_MONTH}\s+)?{_NUM_TOKEN})*"
    rf"(?:\s?(?:[ap]\.?m\.?|{_MONTH}|{_UNITS})(?![a-z]))?",
    re.I,
)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_CODE = re.compile(r"\b(?:[A-Za-z]+_[A-Za-z_]+|[A-Z]{2,8})\b")
STATES = frozenset(
    "AL AK AZ AR CA CO CT DE FL GA ID IL IA KS KY LA MD MA MI MN MS MO MT NE NV NH NJ NM NY NC ND PA RI SC SD TN "
    "TX UT VT VA WA WV WI WY DC".split()
)
SHORT_CODES = STATES | {"XS", "XL"}
"""Two-capital codes that are facts: US states (OK, HI, ME, IN, OR, OH are left out: they are words too) and
clothing sizes."""
_CAPS = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)?(?:['’]s)?(?:\s+(?:[A-Z][a-z]+(?:[A-Z][a-z]+)?|[A-Z]\.))*")
NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
} | {"first": "1", "second": "2", "third": "3", "half": "0.5", "once": "1", "twice": "2", "both": "2", "pair": "2"}
NUMBER_WORDS |= {w: str(10 * (i + 3)) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split())}
"""Number words as digits (what grounds a count written either way)."""
_COUNTS = frozenset(
    "two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty sixty seventy eighty "
    "ninety".split()
)
_DIGIT = re.compile(r"\d")
_INTRO = re.compile(
    r"\b(?:my name is|my name's|name is|call me|under the name(?: of)?)\s+([A-Za-z][a-z'-]+(?: [A-Za-z][a-z'-]+){0,2})",
    re.I,
)
_WORD = re.compile(r"[a-z0-9]+")
_MARKUP = re.compile(r"<\|[^|>]*\|>|</?[a-z_]+>")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n\"(]|\s-|\d[.)])[\s*_>#`~-]*$")
"""Before a sentence's first word: the start, an end mark, a colon, a dash, a list number, then markdown's marks
("**Glad I could help**", "> Unfortunately", "- Sure", "2. Return it")."""
_ENUMERATOR = re.compile(r"(?:^|[:\n]|[.!?]\s)[\s*_>#-]*$")
"""Before a list's "1": the start, a colon, a new line, or a sentence's end (then markdown's marks)."""
COMMON_CAPS = frozenset(
    "i im ive ill id hi hello hey thanks thank yes yeah no nope sure okay ok please sorry also and but so well great "
    "perfect good hmm oh actually just could can would will should may might what when where which who why how is "
    "are do does did have has the a an my it its this that there here then if or not alright awesome agent customer "
    "user assistant monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday "
    "january february march april june july august september october november december mr mrs ms dr "
    "usa us american english".split()
)
"""Capitalised words that are not facts by themselves (greetings, pronouns, weekdays, months: a date is a number)."""
COMMON_CODES = frozenset(
    "ok usa id pm am est pst asap faq sim apn vpn sms mms lte wifi gps tv pdf id yes no api url".split()
)
_ID_LIKE = re.compile(r"[A-Za-z].*\d|\d.*[A-Za-z]{2}")
_TRIM = ".,:;/-'’)"
_FUNCTION = frozenset("and or but is was the a an to for from with in on at of by please thanks thank".split())


@dataclass(frozen=True, slots=True)
class Fact:
    kind: FactKind
    text: str
    """As the customer wrote it."""
    start: int = 0
    """Where it starts in the message."""

    @property
    def label(self) -> str:
        """What to call it in a finding (a number with letters is an id)."""
        if self.kind is FactKind.NUMBER and " " not in self.text and _ID_LIKE.search(self.text):
            return "id"
        return self.kind.value


def stated_facts(text: str) -> list[Fact]:
    """The fact-like spans of one customer message, each once, in the order they appear (spans never overlap)."""
    text = _MARKUP.sub(lambda m: " " * len(m.group(0)), text)  # chat-template tokens are empty_reply's
    found: list[Fact] = []
    taken = bytearray(len(text))  # 1 where a span already lies: spans never overlap

    def take(kind: FactKind, start: int, span: str) -> None:
        span = span.rstrip(_TRIM)
        if span.startswith("(") and ")" not in span:
            start, span = start + 1, span[1:]
        end = start + len(span)
        if span and 1 not in taken[start:end]:
            taken[start:end] = b"\1" * (end - start)
            found.append(Fact(kind, span, start))

    lower = text.lower()
    for m in _EMAIL.finditer(text) if "@" in text else ():
        take(FactKind.EMAIL, m.start(), m.group(0))
    for start, end in _enumerators(text) if _DIGIT.search(text) else ():
        taken[start:end] = b"\1" * (end - start)  # "1. Exchange it 2. Return it": list numbers, not counts
    for m in _NUMBERS.finditer(text) if _DIGIT.search(text) else ():
        take(FactKind.NUMBER, m.start(), m.group(0))
    for m in _INTRO.finditer(text) if "name" in lower or "call me" in lower else ():
        words: list[str] = []
        for word in m.group(1).split():
            if word.lower() in _FUNCTION or _plain(word) in COMMON_CAPS:
                break
            words.append(word)
        if words:
            take(FactKind.NAME, m.start(1), " ".join(words))
    for m in _CODE.finditer(text):
        code = m.group(0)
        if code.lower() not in COMMON_CODES and (len(code) > 2 or code in SHORT_CODES):
            take(FactKind.CODE, m.start(), m.group(0))
    for m in _CAPS.finditer(text):
        start, words = m.start(), m.group(0).split()
        if _SENTENCE_START.search(text[max(0, start - 4) : start]) and words[0].lower() not in value_words():
            start, words = start + len(words[0]) + 1, words[1:]  # a sentence's first word says nothing alone
        while words and _plain(words[0]) in COMMON_CAPS:
            start, words = start + len(words[0]) + 1, words[1:]
        words = [w for w in words if _plain(w) not in COMMON_CAPS]
        if words:
            take(FactKind.NAME, start, text[start : start + len(" ".join(words))])
    values = value_words()
    for m in _WORD.finditer(lower):
        word = m.group(0)
        if word in _COUNTS:
            take(FactKind.NUMBER, m.start(), text[m.start() : m.end()])
        elif word in values:
            take(FactKind.VALUE, m.start(), text[m.start() : m.end()])
    return sorted(found, key=lambda f: f.start)


def _enumerators(text: str) -> list[tuple[int, int]]:
    """Where a numbered list's markers lie: bare numbers 1, 2, 3, ... in order, each before a word, the first at a
    list's start. A lone "1" or "2 bags and 3 boxes" (no 1 first) is not a list."""
    marks = [m for m in re.finditer(r"(?<![\w.,$#])(\d{1,2})[.)]?(?=\s+[A-Za-z])", text)]
    runs: list[tuple[int, int]] = []
    want = 1
    for m in marks:
        if int(m.group(1)) == 1 and _ENUMERATOR.search(text[max(0, m.start() - 8) : m.start()]):
            runs, want = [(m.start(), m.end())], 2  # a list starts (again)
        elif int(m.group(1)) == want and want > 1:
            runs.append((m.start(), m.end()))
            want += 1
    return runs if len(runs) >= 2 else []


def number_spans(text: str) -> list[str]:
    """Just the numbers of ``text`` (what grounds a stated number: no names, codes or values needed)."""
    return [m.group(0).rstrip(_TRIM) for m in _NUMBERS.finditer(text)]


def _plain(word: str) -> str:
    return re.sub(r"['’]s$|[^a-z]", "", word.lower())


def words_of(text: str) -> list[str]:
    """Lower-case word tokens with a plural or possessive ``s`` folded (``boots`` and ``boot`` are one)."""
    out = []
    for w in _WORD.findall(text.lower().replace("’", "'").replace("'s", "")):
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


@cache
def value_words() -> frozenset[str]:
    """τ's databases' value words (item options, names, cities, cabins, plans), lower case."""
    path = Path(__file__).with_name("tau_values.txt")
    try:
        lines = path.read_text().splitlines()  # a comment line's words ("one per line") are no values
        return frozenset(w for line in lines if not line.startswith("#") for w in line.split())
    except OSError:
        return frozenset()
