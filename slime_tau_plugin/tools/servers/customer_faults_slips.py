"""``--faults-set slips``: a customer that slips into the agent's persona mid-conversation (issue 40, held out).

The fifth wrong-customer generator, written blind to the review's checks for one measurement: does the review
catch a customer speaking as the service (τ²'s ``guideline_violation``)? Only ``as_agent`` is played;
``invented_id`` and ``early_stop`` leave the message alone and log nothing, so every log entry is an agent act.

Where: never the opening (it carries the scenario the ground truth matches episodes by), never a message with
``###`` (τ's stop markers), never a telecom "My phone shows:" report of the customer's own device action, never a
tool call. How: one act of :mod:`slips_acts` (the shape), placed as the whole message, after the customer's own
line or before it, in one of several styles (as written, lower case without punctuation, a typo, an emoji, cut
to its first sentence). Whether and what are drawn from a generator seeded by ``TAU_FAULTS_SEED`` and the
conversation so far, so the same conversation gets the same slip whatever the request order.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultKind
from slime_tau_plugin.tools.servers.slips_acts import SHAPES, Values, slip

KIND = "agent_act"
"""The log kind ``benchmarks/user_review_heldout.py`` scores against τ²'s ``guideline_violation``."""
DEVICE_REPORT = "My phone shows:"
PLACEMENTS = (("whole", 0.45), ("after", 0.35), ("before", 0.2))
STYLES = ("plain", "plain", "casual", "typo", "emoji", "short", "long")
_DOMAIN_FIELD = re.compile(r"domain\W{0,4}(retail|airline|telecom)", re.IGNORECASE)
_KEYWORDS = {
    "telecom": re.compile(r"mobile data|roaming|airplane|\bsim\b|signal|data plan|phone number|\bAPN\b", re.I),
    "airline": re.compile(
        r"\bfl(?:y|ying|ights?)\b|reservation|cabin|baggage|passenger|airport|insurance|economy|certificate", re.I
    ),
    "retail": re.compile(r"order|#W\d|exchange|return|zip code|item", re.I),
}


def slips_fault(
    faults: FaultInjector,
    messages: list[dict[str, Any]],
    message: dict[str, Any],
    scenario: str,
    log: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``message`` with an agent act slipped in when ``as_agent`` fires for this conversation; logged in ``log``."""
    rule = next((r for r in faults.rules if r.kind == FaultKind.AS_AGENT), None)
    content = message.get("content")
    if rule is None or not _eligible(messages, message):
        return message
    rng = random.Random(_seed(faults.spec.seed, messages))
    if rng.random() >= rule.rate or (rule.cap is not None and sum(e["kind"] == KIND for e in log) >= rule.cap):
        return message
    said = {str(m.get("content")) for m in messages}
    for _ in range(5):  # a text the episode already holds could not be told apart by the ground truth
        shape = rng.choice(sorted(SHAPES))
        values = values_of(scenario, messages, tools)
        style = rng.choice(STYLES)
        styled = _restyle(slip(shape, values, rng, pad=style != "short"), style, rng)
        if style == "long":  # a model that keeps going: a second act of another shape after the first
            styled = f"{styled}\n\n{slip(rng.choice(sorted(set(SHAPES) - {shape})), values, rng)}"
        text, where = _place(str(content), styled, rng)
        if text not in said and "###" not in text:
            break
    else:
        return message
    faults.record(rule)
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant" and m.get("content"))
    benchmark = "tau2" if "<scenario>" in _system(messages) else "tau1"
    log.append(
        {
            "kind": KIND,
            "shape": shape,
            "placement": where,
            "style": style,
            "text": text,
            "turn": turn,
            "scenario": scenario,
            "domain": f"{benchmark}/{values.domain}",
        }
    )
    return {**message, "content": text}


def _eligible(messages: list[dict[str, Any]], message: dict[str, Any]) -> bool:
    content = message.get("content")
    if not isinstance(content, str) or not content.strip() or message.get("tool_calls"):
        return False
    if "###" in content or DEVICE_REPORT in content:
        return False
    return any(m.get("role") == "assistant" and m.get("content") for m in messages)  # not the opening


def _seed(seed: int | None, messages: list[dict[str, Any]]) -> int:
    said = json.dumps([(m.get("role"), m.get("content")) for m in messages], sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(f"{seed}|slips|{said}".encode()).digest()[:8], "big")


def _system(messages: list[dict[str, Any]]) -> str:
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")


def domain_of(scenario: str, system: str, tools: list[dict[str, Any]] | None) -> str:
    """retail, airline or telecom: the scenario's own ``domain`` field, else user tools (telecom), else keywords."""
    found = _DOMAIN_FIELD.search(scenario) or _DOMAIN_FIELD.search(system)
    if found:
        return found.group(1).lower()
    if tools:
        return "telecom"
    scores = {d: len(p.findall(scenario)) for d, p in _KEYWORDS.items()}
    return max(scores, key=lambda d: scores[d]) if any(scores.values()) else "retail"


def values_of(scenario: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Values:
    """The conversation's own order, reservation, user id, phone, name, item, place and date (scenario first)."""
    agent = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    text = f"{scenario}\n{agent}"
    found: dict[str, str] = {"domain": domain_of(scenario, _system(messages), tools)}
    patterns = {
        "order": r"(#W\d{7})",
        "reservation": r"\b((?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6})\b",
        "user_id": r"\b([a-z]+_[a-z]+_\d{3,5})\b",
        "phone": r"\b(\d{3}-\d{3}-\d{4})\b",
        "name": r"(?:You are|name is|My name is)\s+([A-Z][a-z]+)(?:\s+[A-Z][a-z]+)?",
        "item": r"(?:exchange|return|cancel|replace) (?:the |a |your |my )?([a-z][a-z -]{2,30}?)(?= for| and|[.,])",
        "place": r"\bto ((?:New )?[A-Z][a-z]{3,})\b",
        "date": r"\b((?:January|February|March|April|May|June|July|August|September|October|November|December) "
        r"\d{1,2}|\d{4}-\d{2}-\d{2})\b",
    }
    for key, pattern in patterns.items():
        hit = re.search(pattern, text)
        if hit:
            found[key] = hit.group(1).strip()
    return Values(**found)


def _restyle(text: str, style: str, rng: random.Random) -> str:
    """The act as written, lower case without punctuation, with a typo, an emoji, or cut to its first sentence
    (``long``: as written; the caller adds a second act)."""
    if style == "casual":
        return re.sub(r"[.!?,']", "", text).lower()
    if style == "typo":
        words = text.split(" ")
        long = [i for i, w in enumerate(words) if len(w) > 5 and w.isalpha()]
        if long:
            i = rng.choice(long)
            j = rng.randrange(1, len(words[i]) - 2)
            w = words[i]
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
        return " ".join(words)
    if style == "emoji":
        return f"{text} {rng.choice(('😊', '🙂', '👍', '✈️', '📦', '🙏'))}"
    if style == "short":
        first = re.split(r"(?<=[.!?])\s+|\n", text, maxsplit=1)[0]
        return first or text
    return text


def _place(own: str, act: str, rng: random.Random) -> tuple[str, str]:
    """The act as the whole message, after the customer's own line or before it."""
    where = rng.choices([p for p, _ in PLACEMENTS], weights=[w for _, w in PLACEMENTS])[0]
    if where == "after":
        return f"{own.strip()} {act}", where
    if where == "before":
        return f"{act} {own.strip()}", where
    return act, where
