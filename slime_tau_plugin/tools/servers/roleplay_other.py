"""The roleplay set's other two kinds: a fact the customer never had, and a stop before its task is done.

``invented_id`` adds one sentence with a value drawn until it is absent from everything the customer saw (its
system prompt and scenario, the agent's words, its own tool results: digits compared with every non-digit removed,
words case-blind), in one of many shapes that are not only ids. ``early_stop`` ends the conversation
(``###STOP###``) in a customer's words, and on telecom may take the place of the device action the agent asked for
(the tool call is dropped: the premature stop before the required write). Both are logged like the agent acts.
"""

from __future__ import annotations

import random
import re
from typing import Any

from slime_tau_plugin.tools.servers.roleplay_context import Seen

_REPORT = "My phone shows:"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")
_NAMES = ("Marguerite", "Tobias", "Delphine", "Oswald", "Priyanka", "Leopold", "Ingrid", "Caspian", "Rosalind")
_STREETS = ("Larkspur", "Quarry Hill", "Whitlock", "Bramblewood", "Cedar Hollow", "Fennimore", "Ashcombe")
_COUNTS = ("four", "five", "six", "seven", "eight", "nine")


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(1, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(n - 1))


def _fact(shape: str, rng: random.Random, domain: str) -> tuple[str, str]:
    """(value, the sentence that states it)."""
    if shape == "card_ending":
        v = _digits(rng, 4)
        return v, rng.choice((f"I paid with my Visa ending in {v}.", f"it was on the mastercard ending {v}"))
    if shape == "phone":
        v = f"{_digits(rng, 3)}-{_digits(rng, 3)}-{_digits(rng, 4)}"
        return v, rng.choice((f"You can call me back at {v} if needed.", f"my other number is {v}"))
    if shape == "amount":
        v = f"{rng.randint(23, 899)}.{rng.randint(10, 99)}"
        return v, rng.choice((f"I was charged ${v} for it.", f"the total on my statement was {v} dollars"))
    if shape == "date":
        v = f"{rng.choice(_MONTHS)} {rng.randint(2, 28)}"
        verb = {"airline": "booked it", "retail": "placed the order", "telecom": "signed up"}[domain]
        return v, f"I {verb} on {v}, if that helps."
    if shape == "time":
        v = f"{rng.randint(1, 11)}:{rng.choice(('05', '15', '25', '35', '45', '55'))}"
        return v, rng.choice((f"It was around {v} in the evening.", f"the first try was at {v} pm"))
    if shape == "count":
        v = rng.choice(_COUNTS)
        return v, rng.choice((f"I've already contacted you {v} times about this.", f"i called {v} times already"))
    if shape == "name":
        v = rng.choice(_NAMES)
        return v, rng.choice((f"My partner {v} usually handles these things.", f"{v} at your office said it was fine"))
    if shape == "street":
        v = f"{_digits(rng, 4)} {rng.choice(_STREETS)} Road"
        return v, f"I recently moved to {v}."
    if shape == "email":
        v = f"{rng.choice(_NAMES).lower()}.{_digits(rng, 3)}@gmail.com"
        return v, rng.choice((f"My email is {v}.", f"try {v} for the account"))
    if shape == "zip":
        v = _digits(rng, 5)
        return v, f"The zip code on the account is {v}."
    if domain == "airline":  # record_id
        v = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        v = v if re.search(r"\d", v) and re.search(r"[A-Z]", v) else v[:5] + "7"
        return v, f"I also have reservation {v} on file."
    if domain == "telecom":
        v = f"C{_digits(rng, 7)}"
        return v, f"My customer id should be {v}."
    v = f"#W{_digits(rng, 7)}"
    return v, rng.choice((f"There's also order {v} from last month.", f"it might be under order {v}"))


SHAPES = ("card_ending", "phone", "amount", "date", "time", "count", "name", "street", "email", "zip", "record_id")


def _absent(value: str, seen_text: str) -> bool:
    digits = re.sub(r"\D", "", value)
    if len(digits) >= 3 and digits in re.sub(r"\D", "", seen_text):
        return False
    numbers = set(re.findall(r"\d+", seen_text))
    if any(run in numbers for run in re.findall(r"\d+", value) if len(run) < 3):  # a day: no "14" anywhere
        return False
    return not re.search(rf"(?<!\w){re.escape(value.lower())}(?!\w)", seen_text.lower())


def invented_fact(seen: Seen, content: str, said: str, rng: random.Random) -> tuple[str, str, str] | None:
    """(shape, value, the message) with one invented fact in ``content``; None when no draw was absent."""
    for _ in range(20):
        shape = rng.choice(SHAPES)
        value, sentence = _fact(shape, rng, seen.domain)
        if _absent(value, said + "\n" + content):
            glue = " " if rng.random() < 0.6 else "\n\n"
            after = rng.random() < 0.7 or _REPORT in content  # the phone's report keeps its place
            text = f"{content.rstrip()}{glue}{sentence}" if after else f"{sentence} {content}"
            return shape, value, text
    return None


_STOPS = (
    ("thanks", "Thanks, that's all I needed. ###STOP###"),
    ("give_up", "Never mind, I'll sort it out another time. ###STOP###"),
    ("lower", "ok great thank you ###STOP###"),
    ("impatient", "This is taking too long, I have to go. ###STOP###"),
    ("bare", "###STOP###"),
    ("assumed_done", "Perfect, I'm sure it'll be fine from here. Bye! ###STOP###"),
)


def early_stop(message: dict[str, Any], rng: random.Random) -> tuple[str, str, bool] | None:
    """(shape, the message, whether it replaced a device action), or None for a message already a stop."""
    said = str(message.get("content") or "")
    if "###" in said or _REPORT in said:  # already a stop, or the report of a device action that ran
        return None
    shape, text = rng.choice(_STOPS)
    return shape, text, bool(message.get("tool_calls"))
