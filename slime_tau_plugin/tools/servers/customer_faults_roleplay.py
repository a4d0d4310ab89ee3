"""A customer that slips into the agent's role, written blind to the review's checks (``--faults-set roleplay``).

The fourth customer-fault generator of issue 40, kept for the final held-out measurement: its author saw neither
the review's checks nor the other generators' phrasings. It targets τ²'s ``guideline_violation`` as real LLM user
simulators commit it: the simulator continues the transcript as the assistant (a whole agent turn), lets one
agent sentence into an ordinary reply, writes the service's greeting before its opening, or writes the next
speaker's turn after a label (sources: τ²'s user-simulator guidelines,
langwatch/tasks#738's inverted roles, the "identity confusion" family of the Sim2Real user-simulation study).

``as_agent`` is the set's aim (:mod:`roleplay_acts` writes the acts); ``invented_id`` and ``early_stop`` get a
few shapes of their own (:mod:`roleplay_other`); ``pasted_instructions`` and ``loop`` pass unchanged. Each fault
is logged at ``GET /faults/log`` as kind ``agent_act``, ``invented_fact`` or ``stop`` with its ``shape`` (for an
act: the act, ``a+b`` for two, and its ``form``, placement/style), ``value``, ``text`` (the whole message sent),
``turn``, ``scenario``, ``domain``, ``benchmark`` and ``agent_asked``. The draws are seeded by the conversation and
``TAU_FAULTS_SEED``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

from slime_tau_plugin.tools.faults.spec import CUSTOMER_KINDS, FaultInjector, FaultKind
from slime_tau_plugin.tools.servers.roleplay_acts import WRITERS
from slime_tau_plugin.tools.servers.roleplay_context import Seen, seen_in
from slime_tau_plugin.tools.servers.roleplay_other import early_stop, invented_fact

_PLAYED = (FaultKind.AS_AGENT, FaultKind.INVENTED_ID, FaultKind.EARLY_STOP)
_PHONE_REPORT = "My phone shows:"  # the customer's own device report: kept whole, the act comes after it
_STOP = "###"
_LABELS = ("Agent: ", "Assistant: ", "**Agent:** ", "Customer Service: ", "Representative: ", "assistant\n")
_WORD = re.compile(r"\b[A-Z][a-z']*\b")  # capitalised words; ids, codes and flight numbers keep their case
_OPENING_ACTS = ("greet", "offer_lookup", "verify_identity", "options", "policy")
_PAIRS = (
    ("offer_lookup", "verify_identity"),
    ("report_action", "close"),
    ("apologize", "transfer"),
    ("policy", "options"),
    ("options", "confirm_write"),
    ("report_action", "confirm_write"),
    ("apologize", "offer_lookup"),
)


def roleplay_fault(
    faults: FaultInjector,
    messages: list[dict[str, Any]],
    message: dict[str, Any],
    scenario: str,
    log: list[dict[str, Any]],
) -> dict[str, Any]:
    """``message`` with the service's speech acts in it when ``as_agent`` fires, else unchanged."""
    rule = faults.draw(CUSTOMER_KINDS)
    if rule is None or rule.kind not in _PLAYED:
        return message
    seen, rng, content = seen_in(messages, scenario), _rng(faults, messages), message.get("content")
    entry = {"turn": seen.turn, "scenario": scenario, "domain": seen.domain, "benchmark": seen.benchmark}
    if rule.kind is FaultKind.EARLY_STOP:
        stopped = early_stop(message, rng) if seen.turn > 1 else None  # the opening names the episode: kept
        if stopped is None:
            return message
        shape, text, replaced = stopped
        entry["turn"] = seen.turn - 1  # the episode records no stop message: its customer said this many before
        log.append(
            {"kind": "stop", "shape": shape, "value": "###STOP###", "text": text, **entry, "agent_asked": replaced}
        )
        return {"role": message.get("role", "assistant"), "content": text}  # a device action it did not take
    if message.get("tool_calls") or not isinstance(content, str) or not content.strip() or _STOP in content:
        return message  # a stop's message: the episode ends without recording it, so no fault there is seen
    if rule.kind is FaultKind.INVENTED_ID:
        invented = invented_fact(seen, content, _said(messages, scenario), rng)
        if invented is None:
            return message
        shape, value, text = invented
        log.append(
            {"kind": "invented_fact", "shape": shape, "value": value, "text": text, **entry, "agent_asked": False}
        )
        return {**message, "content": text}
    shape, form, act, text = _compose(seen, content, rng)
    log.append(
        {"kind": "agent_act", "shape": shape, "form": form, "value": act, "text": text, **entry, "agent_asked": False}
    )
    return {**message, "content": text}


def _said(messages: list[dict[str, Any]], scenario: str) -> str:
    """Everything the customer had: its prompt, the scenario, every message and tool result so far."""
    return scenario + "\n" + "\n".join(str(m.get("content") or "") for m in messages)


def _rng(faults: FaultInjector, messages: list[dict[str, Any]]) -> random.Random:
    """The same conversation and seed give the same act, whatever came before on the server."""
    said = json.dumps(messages, sort_keys=True, default=str)
    return random.Random(hashlib.sha256(f"{faults.spec.seed}/{said}".encode()).hexdigest())


def _acts(seen: Seen, rng: random.Random, *, opening: bool) -> list[str]:
    if opening:
        return [rng.choice(_OPENING_ACTS)]
    if rng.random() < 0.3:
        pair = rng.choice(_PAIRS + ((("device", "confirm_write"), ("offer_lookup", "device")) if _tel(seen) else ()))
        return list(pair)
    names = [n for n in WRITERS if n != "greet" and (n != "device" or _tel(seen))]
    if _tel(seen):
        names += ["device", "device"]  # the telecom agent's most common act: telling the other side what to tap
    return [rng.choice(names)]


def _tel(seen: Seen) -> bool:
    return seen.domain == "telecom"


def _compose(seen: Seen, content: str, rng: random.Random) -> tuple[str, str, str, str]:
    """(shape, form, the act as written, the whole message)."""
    opening = seen.turn == 1
    names = _acts(seen, rng, opening=opening)
    style = rng.choice(("plain", "plain", "lower", "markdown"))
    parts = [WRITERS[n](seen, rng) for n in names]
    act = _styled(" ".join(parts) if len(parts) == 1 or rng.random() < 0.5 else "\n\n".join(parts), style, rng)
    if opening and names[0] == "greet":
        placement = "head"
    elif opening or _PHONE_REPORT in content:
        placement = "tail"
    else:
        placement = rng.choice(("whole", "whole", "tail", "head", "label"))
    if placement == "head":
        text = f"{act}\n\n{content}"
    elif placement == "tail":
        text = f"{content.rstrip()} {act}" if rng.random() < 0.5 else f"{content.rstrip()}\n\n{act}"
    elif placement == "label":
        text = f"{content.rstrip()}\n\n{rng.choice(_LABELS)}{act}"
    else:
        text = act
    return "+".join(names), f"{placement}/{style}", act, text


def _styled(act: str, style: str, rng: random.Random) -> str:
    if style == "lower":
        return re.sub(r"[.!,]", "", _WORD.sub(lambda m: m.group(0).lower(), act))
    if style == "markdown":
        lines = [line for line in act.split("\n") if line.strip()]
        if len(lines) == 1:
            return rng.choice(("**{}**", "> {}", "{} 😊")).format(lines[0])
        return "\n".join(f"- {line}" if not line[:1].isdigit() else f"**{line}**" for line in lines)
    return act
