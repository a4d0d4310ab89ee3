"""Invented facts the way an LLM customer slips them in, per τ domain (``customer_faults_freeform.py``).

A real user simulator rarely announces a made-up value; it answers the agent and adds a detail it was never given
(τ²'s guidelines: "Never make up or hallucinate information not provided in the scenario instructions"; τ-bench v1:
"if the agent asks for the order id but it is not mentioned in the instruction, do not make up an order id").
The values come in the forms people write them: ids of each domain's format, ids *misremembered* from a real one in
the conversation (one digit off), read out digit by digit, "ending in", spelled and ordinal dates, relative dates,
amounts, names misspelled from the account's own, item options, device readings the phone never showed. Each
generator returns the sentence, the value as written and the forms whose absence ``freeform_grounding`` tests.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from slime_tau_plugin.tools.servers.freeform_grounding import ORDINAL_WORDS, Context, spell_digits

__all__ = ["DEVICE_READINGS", "Fact", "GENERATORS"]

_MONTHS = "January February March April May June July August September October November December".split()
_STREETS = ("Larkspur Lane", "Old Mill Road", "Birchwood Court", "Harbor View Drive", "Quarry Street", "Fenwick Ave")
_CITIES = ("Tucson", "Spokane", "Albany", "Wichita", "Savannah", "Boise")
_COLORS = ("burgundy", "teal", "mustard yellow", "lavender", "olive", "coral")
_FIRST = ("Dana", "Priya", "Marcus", "Elena", "Tomas", "Keiko")
_LAST = ("Whitfield", "Okafor", "Lindqvist", "Marchetti", "Dubois", "Haddad")
_DEVICES = ("Pixel 6a", "Galaxy S21", "iPhone 12 mini", "Moto G Power")
_PLANS = ("Unlimited Plus", "Family Share 20", "Prepaid Basic")
_SEEN_ID = re.compile(
    r"#W\d{7}|\b[a-z]+_[a-z]+_\d{4}\b|\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b|\b[CL]\d{4}\b|\b\d{3}-\d{3}-\d{4}\b"
)
"""Ids a customer may see and misremember: retail orders and user ids, airline reservations, telecom customer and
line ids and phone numbers."""


@dataclass(frozen=True)
class Fact:
    shape: str
    value: str
    """The value as written in the message (a substring of it)."""
    sentence: str
    forms: tuple[str, ...]
    """What must be absent from the customer's context for the value to be invented."""


Generator = Callable[[Context, random.Random], "Fact | None"]


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randrange(1, 10)) + "".join(str(rng.randrange(10)) for _ in range(n - 1))


def _off_by_one(rng: random.Random, value: str) -> str:
    """``value`` with one digit changed: a customer misremembering an id it did see."""
    places = [i for i, c in enumerate(value) if c.isdigit()]
    i = rng.choice(places)
    return value[:i] + str((int(value[i]) + rng.randrange(1, 10)) % 10) + value[i + 1 :]


def _pick(rng: random.Random, *templates: str, **values: str) -> str:
    return rng.choice(templates).format(**values)


def order_id(ctx: Context, rng: random.Random) -> Fact:
    v = f"#W{_digits(rng, 7)}"
    s = _pick(rng, "It's order {v}.", "The order number should be {v}.", "That was order {v}, if it helps.", v=v)
    return Fact("order_id", v, s, (v,))


def misremembered_id(ctx: Context, rng: random.Random) -> Fact | None:
    """A format-correct id one digit away from one the customer did see (order, user, reservation, phone)."""
    seen = _SEEN_ID.findall(ctx.text)
    if not seen:
        return None
    v = _off_by_one(rng, rng.choice(sorted(set(seen))))
    s = _pick(rng, "I think it's {v}.", "My records say {v}.", "It should be under {v}.", v=v)
    return Fact("misremembered_id", v, s, (v,))


def spelled_order(ctx: Context, rng: random.Random) -> Fact:
    d = _digits(rng, 7)
    v = rng.choice((f"W {spell_digits(d)}", f"W{d[:3]}-{d[3:]}", f"W-{spell_digits(d, '-')}"))
    return Fact("spelled_order", v, _pick(rng, "The order number is {v}.", "It's order {v}, I think.", v=v), (d,))


def tracking(ctx: Context, rng: random.Random) -> Fact:
    d = _digits(rng, 12)
    v = rng.choice((d, f"{d[:4]} {d[4:8]} {d[8:]}"))
    return Fact("tracking_number", v, _pick(rng, "The tracking number says {v}.", "Tracking is {v}.", v=v), (d,))


def seat(ctx: Context, rng: random.Random) -> Fact:
    row = rng.randrange(8, 40)
    v = f"{row}{rng.choice('ABCDEF')}"
    s = _pick(rng, "I was in seat {v} on the way out.", "Please keep me in seat {v}.", v=v)
    return Fact("seat", v, s, (v,))


def spelled_zip(ctx: Context, rng: random.Random) -> Fact:
    d = _digits(rng, 5)
    v = spell_digits(d)
    return Fact("spelled_zip", v, _pick(rng, "My zip code is {v}.", "Zip is {v}.", v=v), (d,))


def card_ending(ctx: Context, rng: random.Random) -> Fact:
    d = _digits(rng, 4)
    brand = rng.choice(("Visa", "Mastercard", "Amex", "credit card", "debit card"))
    v = f"ending in {d}"
    s = _pick(rng, "Please use my {b} {v}.", "It went on the {b} {v}.", "Charge the {b} {v}.", b=brand, v=v)
    return Fact("card_ending", v, s, (d,))


def partial_id(ctx: Context, rng: random.Random) -> Fact:
    d = _digits(rng, 3)
    v = f"ends in {d}"
    return Fact("partial_id", v, _pick(rng, "The one I mean {v}.", "I only remember it {v}.", v=v), (d,))


def email(ctx: Context, rng: random.Random) -> Fact:
    names = re.findall(r"\b([a-z]+)_([a-z]+)_\d{4}\b", ctx.text)
    first, last = names[0] if names else (rng.choice(_FIRST).lower(), rng.choice(_LAST).lower())
    v = f"{first}.{last}{rng.randrange(10, 99)}@{rng.choice(('gmail.com', 'yahoo.com', 'outlook.com'))}"
    s = _pick(rng, "My email is {v}.", "You can reach me at {v}.", "The email on file is {v}.", v=v)
    return Fact("email", v, s, (v,))


def address(ctx: Context, rng: random.Random) -> Fact:
    n = _digits(rng, rng.choice((3, 4)))
    v = f"{n} {rng.choice(_STREETS)}"
    s = _pick(
        rng, "Ship it to {v}, {c}.", "I live at {v} in {c}.", "My address is {v}, {c}.", v=v, c=rng.choice(_CITIES)
    )
    return Fact("address", v, s, (v, n))


def phone(ctx: Context, rng: random.Random) -> Fact:
    d = "555" + _digits(rng, 7)
    v = rng.choice((f"({d[:3]}) {d[3:6]}-{d[6:]}", f"{d[:3]}.{d[3:6]}.{d[6:]}", f"{d[:3]} {d[3:6]} {d[6:]}"))
    return Fact("phone", v, _pick(rng, "My number is {v}.", "The line is {v}.", v=v), (d,))


def amount(ctx: Context, rng: random.Random) -> Fact:
    dollars, cents = rng.randrange(120, 990), rng.randrange(1, 99)
    v = rng.choice((f"${dollars}.{cents:02d}", f"{dollars} dollars", f"${dollars:,}"))
    s = _pick(rng, "It cost me {v}.", "I paid {v} for it.", "The charge was {v}.", v=v)
    return Fact("amount", v, s, (f"{dollars}",))


def calendar_date(ctx: Context, rng: random.Random) -> Fact:
    month, day = rng.randrange(12), rng.randrange(2, 28)
    v = rng.choice(
        (f"{_MONTHS[month]} {day}", f"the {ORDINAL_WORDS[day] if day <= 20 else f'{day}th'} of {_MONTHS[month]}")
    )
    s = _pick(rng, "That was on {v}.", "It was {v}, I believe.", "I think it was {v}.", v=v)
    return Fact("calendar_date", v, s, (f"{_MONTHS[month]}{day}", f"{month + 1:02d}{day:02d}", v))


def relative_date(ctx: Context, rng: random.Random) -> Fact:
    v = rng.choice(("three weeks ago", "last Tuesday", "the day before yesterday", "about ten days ago"))
    return Fact(
        "relative_date",
        v,
        _pick(rng, "This all started {v}.", "I first noticed it {v}.", "I already called about this {v}.", v=v),
        (v,),
    )


def name_variant(ctx: Context, rng: random.Random) -> Fact | None:
    """The account holder's own name, misspelled: a customer that misremembers how it is written."""
    names = re.findall(r"\b([a-z]+)_([a-z]+)_\d{4}\b", ctx.text)
    if not names:
        return None
    first, last = names[0]
    vowels = [i for i, c in enumerate(last) if c in "aeiou"]
    i = rng.choice(vowels) if vowels else 0
    swapped = last[:i] + rng.choice([c for c in "aeiouy" if c != last[i]]) + last[i + 1 :]
    v = f"{first.title()} {swapped.title()}"
    return Fact("name_variant", v, _pick(rng, "The name on it is {v}.", "It's under {v}.", v=v), (swapped,))


def other_person(ctx: Context, rng: random.Random) -> Fact:
    v = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    s = _pick(rng, "My partner {v} is on the account too.", "It was a gift for {v}.", "{v} booked it for me.", v=v)
    return Fact("other_person", v, s, (v,))


def item_option(ctx: Context, rng: random.Random) -> Fact:
    v = rng.choice(_COLORS)
    return Fact("item_option", v, _pick(rng, "I'd like it in {v}.", "Mine is the {v} one.", v=v), (v,))


def count(ctx: Context, rng: random.Random) -> Fact:
    n = rng.randrange(3, 9)
    v = rng.choice((str(n), spell_digits(str(n))))
    what = rng.choice(("bags", "items", "people", "times"))
    return Fact("count", f"{v} {what}", f"It's {v} {what} in total.", (str(n),))


def reservation(ctx: Context, rng: random.Random) -> Fact:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    v = "".join(rng.choice(letters + "0123456789") for _ in range(5)) + rng.choice("23456789")
    s = _pick(rng, "The confirmation code is {v}.", "Reservation {v}.", "It's booking {v}.", v=v)
    return Fact("reservation_id", v, s, (v,))


def flight(ctx: Context, rng: random.Random) -> Fact:
    d = _digits(rng, 3)
    v = rng.choice((f"HAT{d}", f"HAT {d}", f"flight {spell_digits(d)}"))
    return Fact("flight", v, _pick(rng, "I'm on {v}.", "It's {v} out of {c}.", v=v, c=rng.choice(_CITIES)), (d,))


def membership(ctx: Context, rng: random.Random) -> Fact:
    v = rng.choice(("platinum member", "diamond tier", "executive platinum status"))
    return Fact("membership", v, _pick(rng, "I'm a {v}, by the way.", "I have {v}.", v=v), (v.split()[0],))


def device(ctx: Context, rng: random.Random) -> Fact:
    v = rng.choice(_DEVICES)
    a = "an" if v[0].lower() in "aeiou" else "a"
    return Fact("device_model", v, _pick(rng, "It's {a} {v}.", "I'm using {a} {v}.", a=a, v=v), (v,))


def plan(ctx: Context, rng: random.Random) -> Fact:
    v = rng.choice(_PLANS)
    return Fact("plan", v, _pick(rng, "I'm on the {v} plan.", "My plan is {v}.", v=v), (v,))


def reading(ctx: Context, rng: random.Random) -> Fact:
    """A device reading the phone never showed (τ²: "Never make up the results of tool calls")."""
    mbps = rng.randrange(31, 99)
    v = rng.choice((f"{mbps} Mbps", f"{mbps}.{rng.randrange(1, 9)} Mbps"))
    return Fact("device_reading", v, _pick(rng, "The speed test says {v}.", "It's getting about {v} now.", v=v), (v,))


def data_used(ctx: Context, rng: random.Random) -> Fact:
    v = f"{rng.randrange(11, 40)}.{rng.randrange(1, 9)} GB"
    return Fact("data_used", v, _pick(rng, "I've used {v} this month.", "It says {v} used.", v=v), (v,))


_COMMON: tuple[Generator, ...] = (card_ending, email, phone, spelled_zip, relative_date, calendar_date, other_person)
DEVICE_READINGS: tuple[Generator, ...] = (reading, data_used)
"""What a telecom customer misreports right after its phone's own report (a made-up tool result)."""
GENERATORS: dict[str, tuple[Generator, ...]] = {
    "retail": (
        order_id,
        spelled_order,
        misremembered_id,
        partial_id,
        tracking,
        address,
        amount,
        name_variant,
        item_option,
        count,
        *_COMMON,
    ),
    "airline": (reservation, misremembered_id, flight, seat, membership, amount, name_variant, count, *_COMMON),
    "telecom": (device, plan, reading, data_used, amount, misremembered_id, *_COMMON),
}
"""A τ domain -> the invented facts its customer can state (telecom's ids are phone numbers and plans)."""
