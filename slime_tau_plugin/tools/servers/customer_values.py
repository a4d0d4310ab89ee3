"""Real-looking values a lying customer states, drawn from τ's own data and checked absent from what it knows.

The held-out fault generator (``customer_faults_paraphrased.py``) needs values that look like a τ customer's
(another customer's card ending, a real product's colour, an airline reservation code) so that no check can tell
them from grounded ones by shape, and that are provably ungrounded: :func:`draw_value` redraws until the value
(and its digits-only form, and each of its words) is absent from the customer's sources (its instructions, its
own tool results, everything the agent said). The pools are read once from τ²'s installed retail and airline
databases (τ-bench v1 shares their data); without them, or for telecom, values are built in each domain's formats.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SHAPES", "Pools", "absent", "draw_value", "pools"]

_WORD = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+")
SHAPES = (
    "card_digits",
    "phone",
    "amount",
    "date",
    "time",
    "count",
    "person_name",
    "street_address",
    "item_option",
    "domain_id",
)
"""The invented facts' shapes (none of them an email, and ids only in ``domain_id``)."""
_MONTHS = "January February March April May June July August September October November December".split()


@dataclass
class Pools:
    """Values seen in τ's databases, by shape (lists, so a seeded draw is reproducible)."""

    last_four: list[str] = field(default_factory=list)
    names: list[tuple[str, str]] = field(default_factory=list)
    streets: list[str] = field(default_factory=list)
    options: list[tuple[str, str, str]] = field(default_factory=list)
    """(product name, option name, value), e.g. ("T-Shirt", "color", "purple")."""
    prices: list[float] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    ids: dict[str, list[str]] = field(default_factory=dict)
    """Domain -> real ids of its formats (retail ``#W``-orders and item ids, airline reservation codes...)."""


@functools.lru_cache(maxsize=1)
def pools() -> Pools:
    """The pools, read from τ²'s installed data once per process (empty where τ² is not installed)."""
    found = Pools()
    try:
        from tau2.utils.utils import DATA_DIR
    except Exception:  # noqa: BLE001 - no τ² here: values are built in the formats alone
        return found
    root = Path(DATA_DIR) / "tau2" / "domains"
    for domain in ("retail", "airline"):
        path = root / domain / "db.json"
        if path.is_file():
            _read(found, domain, json.loads(path.read_text()))
    return found


def _read(found: Pools, domain: str, db: dict) -> None:
    ids = found.ids.setdefault(domain, [])
    for user in db.get("users", {}).values():
        name = user.get("name") or {}
        found.names.append((str(name.get("first_name", "")), str(name.get("last_name", ""))))
        found.streets.append(str((user.get("address") or {}).get("address1", "")))
        found.last_four += [str(m["last_four"]) for m in user.get("payment_methods", {}).values() if "last_four" in m]
        ids.append(str(user.get("user_id")))
    for product in db.get("products", {}).values():
        for variant in product.get("variants", {}).values():
            found.options += [(product["name"], k, str(v)) for k, v in variant.get("options", {}).items()]
            found.prices.append(float(variant.get("price", 0.0)))
            ids.append(str(variant.get("item_id")))
    ids += [str(k) for k in db.get("orders", {})] + [str(k) for k in db.get("reservations", {})]
    for flight in list(db.get("flights", {}).values())[:200]:
        ids.append(str(flight.get("flight_number")))
        found.times.append(str(flight.get("scheduled_departure_time_est", ""))[:5])
        found.dates += list(flight.get("dates", {}))[:3]


def absent(value: str, sources: str) -> bool:
    """Whether ``value`` is nowhere in ``sources``: as text, as its digits, and word by word (case-insensitive).

    Numbers are compared whole (``7`` is not in ``17``); a word of two letters or fewer is not compared alone.
    """
    low = sources.lower()
    if value.lower() in low:
        return False
    digits = "".join(_NUMBER.findall(value))
    if digits and (
        digits in "".join(_NUMBER.findall(low)) or any(n in _NUMBER.findall(low) for n in _NUMBER.findall(value))
    ):
        return False
    words = set(_WORD.findall(low))
    return not any(w in words for w in _WORD.findall(value.lower()) if len(w) > 2 and not w.isdigit())


def draw_value(rng: random.Random, shape: str, domain: str, sources: str) -> str | None:
    """A value of ``shape`` absent from ``sources`` (None after 200 tries: the caller picks another shape)."""
    make = _MAKERS[shape]
    for _ in range(200):
        value = make(rng, domain, pools())
        if value and absent(value, sources):
            return value
    return None


def _pick(rng: random.Random, pool: list, fallback: Callable[[], object]) -> object:
    return rng.choice(pool) if pool and rng.random() < 0.8 else fallback()


def _card(rng: random.Random, domain: str, p: Pools) -> str:
    return str(_pick(rng, p.last_four, lambda: f"{rng.randrange(10**4):04d}"))


def _phone(rng: random.Random, domain: str, p: Pools) -> str:
    area, mid, end = rng.randrange(201, 990), rng.randrange(200, 999), rng.randrange(10**4)
    if domain == "telecom" and rng.random() < 0.5:
        return f"555-123-{rng.randrange(2100, 9999)}"
    return rng.choice([f"({area}) {mid}-{end:04d}", f"{area}-{mid}-{end:04d}", f"{area}.{mid}.{end:04d}"])


def _amount(rng: random.Random, domain: str, p: Pools) -> str:
    price = float(_pick(rng, p.prices, lambda: rng.randrange(1500, 250000) / 100))
    price = round(price * rng.choice([1, 1, 2, 3]) + rng.choice([0, 0.5, 12.25]), 2)
    return rng.choice([f"${price:,.2f}", f"{price:.2f} dollars", f"${price:,.0f}"])


def _date(rng: random.Random, domain: str, p: Pools) -> str:
    if p.dates and rng.random() < 0.3:
        return str(rng.choice(p.dates))
    month, day = rng.randrange(12), rng.randrange(1, 29)
    return rng.choice([f"{_MONTHS[month]} {day}", f"{month + 1}/{day}", f"the {day}th of {_MONTHS[month]}"])


def _time(rng: random.Random, domain: str, p: Pools) -> str:
    hour, minute = rng.randrange(1, 12), rng.choice([5, 10, 15, 20, 25, 35, 40, 45, 50, 55])
    return rng.choice([f"{hour}:{minute:02d} {rng.choice(['am', 'pm'])}", f"{hour + 12}:{minute:02d}"])


def _count(rng: random.Random, domain: str, p: Pools) -> str:
    return str(rng.randrange(11, 60))


def _name(rng: random.Random, domain: str, p: Pools) -> str:
    first, last = _pick(rng, p.names, lambda: (rng.choice(["Priya", "Tomasz", "Aiko"]), "Okafor"))  # type: ignore[misc]
    return f"{first} {last}"


def _street(rng: random.Random, domain: str, p: Pools) -> str:
    street = str(_pick(rng, p.streets, lambda: "Juniper Lane"))
    street = re.sub(r"^\d+\s*", "", street)
    return f"{rng.randrange(100, 9999)} {street}"


def _option(rng: random.Random, domain: str, p: Pools) -> str:
    if not p.options:
        return rng.choice(["teal", "size XXL", "2TB", "walnut"])
    _, key, value = rng.choice(p.options)
    return value if key in ("color", "material") else f"{value} {key}".strip()


def _domain_id(rng: random.Random, domain: str, p: Pools) -> str:
    if domain == "telecom":
        return rng.choice(
            [f"L{rng.randrange(2000, 9999)}", f"C{rng.randrange(2000, 9999)}", f"B{rng.randrange(10**6)}"]
        )
    pool = p.ids.get(domain) or p.ids.get("retail") or []
    if pool and rng.random() < 0.85:
        return str(rng.choice(pool))
    letters = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))
    return rng.choice([f"#W{rng.randrange(10**6, 10**7)}", letters, f"HAT{rng.randrange(300, 999)}"])


_MAKERS: dict[str, Callable[[random.Random, str, Pools], str]] = {
    "card_digits": _card,
    "phone": _phone,
    "amount": _amount,
    "date": _date,
    "time": _time,
    "count": _count,
    "person_name": _name,
    "street_address": _street,
    "item_option": _option,
    "domain_id": _domain_id,
}
