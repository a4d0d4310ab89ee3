"""What the roleplay customer has seen: its benchmark, τ domain and the real values of its conversation.

A real LLM customer that slips into the agent's part speaks about *this* conversation ("let me pull up order
#W2378156"), so the agent acts of ``customer_faults_roleplay.py`` are built from the ids, flights, items, lines and
settings the customer's instructions and the agent's messages hold, never invented ones (an invented value would
be a second fault in the same message and blur what the act tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_ORDER = re.compile(r"#W\d{7}")
_RESERVATION = re.compile(r"\b(?=[A-Z0-9]{6}\b)(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b")
_FLIGHT = re.compile(r"\bHAT\d{3}\b")
_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{4}\b")
_PHONE = re.compile(r"\b\d{3}-\d{3}-\d{4}\b")
_ITEMS = (
    "t-shirt", "water bottle", "laptop", "headphones", "jacket", "sneakers", "desk lamp", "bookshelf",
    "mechanical keyboard", "keyboard", "smart watch", "hiking boots", "backpack", "skateboard", "coffee maker",
    "bicycle", "electric kettle", "office chair", "running shoes", "digital camera", "gaming mouse", "pet bed",
    "tea kettle", "air purifier", "vacuum cleaner", "garden hose", "perfume", "wristwatch", "fleece jacket",
    "espresso machine", "action camera", "luggage set", "cycling helmet", "patio umbrella", "yoga mat",
    "security camera", "grill", "jigsaw puzzle", "wall clock", "makeup kit", "notebook", "e-reader", "sunglasses",
    "portable charger", "bluetooth speaker", "smartphone", "tablet", "dumbbell set", "electric toothbrush",
    "wireless earbuds", "hoodie", "sweater", "mouse", "monitor", "fridge", "blender", "desk", "lamp",
)  # fmt: skip
_SETTINGS = (
    "airplane mode", "mobile data", "data roaming", "wi-fi calling", "wifi calling", "apn", "sim card", "vpn",
    "data saver", "mms", "network mode", "roaming", "battery saver", "wi-fi",
)  # fmt: skip
_TELECOM = re.compile(r"\b(phone|mobile data|sim|signal|roaming|line|bars|mms|internet|data plan)\b", re.I)
_AIRLINE = re.compile(r"\b(flight|reservation|airline|baggage|cabin|economy|airport|booking|travel)\b", re.I)
_DOMAIN = re.compile(r"Domain:\s*(\w+)")


@dataclass(frozen=True, slots=True)
class Seen:
    """The conversation as the customer saw it, reduced to what an agent act can name."""

    benchmark: str
    domain: str
    orders: tuple[str, ...] = ()
    reservations: tuple[str, ...] = ()
    flights: tuple[str, ...] = ()
    user_ids: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    turn: int = 1
    """The customer's message number this reply will be (1: its opening), counted as the episode records them: a
    device action's tool call is no message of its own (its report after the result is)."""
    agent_asked: bool = False
    """The agent's last message asked the customer to act or confirm."""


def _unique(found: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(found))


def text_of(messages: list[dict[str, Any]], role: str | None = None) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages if role is None or m.get("role") == role)


def seen_in(messages: list[dict[str, Any]], scenario: str) -> Seen:
    """Every value the customer saw: its scenario, the agent's words (role ``user`` on its side), its tool results.

    The system prompt counts only through ``scenario``: τ's user prompt also carries guidelines whose words
    (examples, tokens) are not this conversation's values.
    """
    system = text_of([m for m in messages if m.get("role") == "system"])
    heard = "\n".join([scenario, text_of(messages[1:], "user"), text_of(messages[1:], "tool")])
    benchmark = "tau2" if "<scenario>" in system else "tau1"
    named = _DOMAIN.search(scenario)
    if named and named.group(1).lower() in ("retail", "airline", "telecom"):
        domain = named.group(1).lower()
    elif len(_TELECOM.findall(heard)) > 1 and not _ORDER.search(heard):
        domain = "telecom"
    elif _AIRLINE.search(heard) and not _ORDER.search(heard):
        domain = "airline"
    else:
        domain = "retail"
    low = heard.lower()
    agent = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    asked = bool(agent) and bool(re.search(r"\?|please|confirm|could you", agent[-1], re.I))
    return Seen(
        benchmark=benchmark,
        domain=domain,
        orders=_unique(_ORDER.findall(heard)),
        reservations=_unique([r for r in _RESERVATION.findall(heard) if not r.startswith("HAT")]),
        flights=_unique(_FLIGHT.findall(heard)),
        user_ids=_unique(_USER_ID.findall(heard)),
        phones=_unique(_PHONE.findall(heard)),
        items=_unique([i for i in _ITEMS if re.search(rf"\b{re.escape(i)}s?\b", low)]),
        settings=_unique([s for s in _SETTINGS if re.search(rf"\b{re.escape(s)}\b", low)]),
        turn=1 + sum(m.get("role") == "assistant" and not m.get("tool_calls") for m in messages),
        agent_asked=asked,
    )
