"""The held-out customer faults: a lying or slipping customer in many shapes, written apart from the review's checks.

``customer_faults.py`` injects one template per kind, and the review's checks were written knowing them. This
second generator (``slime-tau serve-user --faults-set paraphrased``) is the one the checks were *not* tuned on
(issue 40): it phrases each fault the way an LLM customer slips, with randomised wording and real-looking values.
The same ``--faults`` kinds select it, read as:

- ``invented_id`` -> an **invented fact** of one of ``customer_values.SHAPES`` (card ending, phone number,
  amount, date, time, count, person's name, street address, item option, an id of the domain's format), its
  value drawn absent from the instructions, the customer's own tool results and everything the agent said;
- ``as_agent`` -> an **agent act**: the customer offers to look something up, reports an action it performed,
  asks the agent to verify identity, greets as the service or wraps up as the service, never naming itself;
- ``early_stop`` -> a **stop** (``###STOP###``, or a transfer request where τ² has ``###TRANSFER###``) in place of
  the customer's answer; whether it was premature (before the task's required write) is the benchmark's to read
  off the episode, since the server cannot see the agent's tools.

The markers are not in the text (a check could learn them): each injection is appended to the server's log
(``GET /faults/log``: kind, shape, value, the injected text, the turn and the scenario it happened in).
``pasted_instructions`` and ``loop`` are not drawn here.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultKind
from slime_tau_plugin.tools.servers.customer_phrases import agent_act, fact_sentence, stop_line
from slime_tau_plugin.tools.servers.customer_values import SHAPES, draw_value

__all__ = ["KINDS", "LOG_LIMIT", "domain_of", "paraphrased_fault"]

KINDS = {FaultKind.INVENTED_ID: "invented_fact", FaultKind.AS_AGENT: "agent_act", FaultKind.EARLY_STOP: "stop"}
"""The ``--faults`` kind -> the held-out kind the log names."""
LOG_LIMIT = 20_000
"""Entries the log keeps (a benchmark reads it per set; a long soak must not grow it without end)."""
_STOP_MARK = "###"
_WAITS_ON = ("please", "confirm", "proceed", "yes/no", "yes or no", "shall i", "would you like me to", "go ahead?")


def domain_of(system: str) -> tuple[str, bool]:
    """The τ domain a user prompt is about, and whether it is τ² (``<scenario>``) rather than τ-bench v1."""
    tau2 = "<scenario>" in system
    low = system.lower()
    for domain in ("telecom", "airline", "retail"):
        if f"domain: {domain}" in low:
            return domain, tau2
    airline = any(w in low for w in ("flight", "reservation", "airline", "baggage"))
    return ("airline" if airline else "retail"), tau2


def paraphrased_fault(
    faults: FaultInjector,
    messages: list[dict[str, Any]],
    message: dict[str, Any],
    scenario: str,
    log: list[dict[str, Any]],
) -> dict[str, Any]:
    """``message`` (the customer's next reply) with a drawn held-out fault, logged in ``log``; else unchanged."""
    content = str(message.get("content") or "")
    if _STOP_MARK in content:
        return message  # the customer is ending anyway: a fault here would change nothing
    own = sum(1 for m in messages if m.get("role") == "assistant" and m.get("content"))
    calls = bool(message.get("tool_calls"))
    kinds = (FaultKind.INVENTED_ID, FaultKind.AS_AGENT)
    kinds = (*kinds, FaultKind.EARLY_STOP) if own else kinds  # a stop before the opening fails the episode
    if calls:
        kinds = (FaultKind.EARLY_STOP,) if own else ()  # a stop may replace a tool call; other faults need text
    if not kinds:
        return message
    rule = faults.draw(kinds)
    if rule is None:
        return message
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    domain, tau2 = domain_of(system)
    rng = random.Random(hashlib.sha256(repr([m.get("content") for m in messages]).encode()).digest())
    entry: dict[str, Any] = {"kind": KINDS[rule.kind], "turn": own, "scenario": scenario, "domain": domain}
    if rule.kind is FaultKind.EARLY_STOP:
        text, entry["shape"] = stop_line(rng, tau2)
        entry["agent_asked"] = _agent_asked(messages)  # tau2-bench #297: it ends where the agent waits on it
    elif rule.kind is FaultKind.AS_AGENT:
        line, entry["shape"] = agent_act(rng, domain)
        text = _join(rng, line, content, own == 0 or _after_tool(messages))
    else:
        sources = "\n".join(str(m.get("content") or "") for m in messages)
        line = None
        for shape in rng.sample(SHAPES, len(SHAPES)):
            value = draw_value(rng, shape, domain, sources)
            if value is not None:
                line = fact_sentence(rng, shape, value, domain)
                entry.update(shape=shape, value=value)
                break
        if line is None:
            return message
        text = _join(rng, line, content, own == 0 or _after_tool(messages))
    entry["text"] = text
    if len(log) < LOG_LIMIT:
        log.append(entry)
    return {"role": "assistant", "content": text}


def _join(rng: random.Random, line: str, content: str, keep: bool) -> str:
    """The fault said before or after the customer's own words, or instead of a later "go ahead"; ``keep``: the
    words stay (the opening's scenario, a report of the customer's own tool)."""
    if not keep and rng.random() < 0.35:
        return line
    return f"{line} {content}" if rng.random() < 0.5 else f"{content} {line}"


def _after_tool(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and messages[-1].get("role") == "tool"


def _agent_asked(messages: list[dict[str, Any]]) -> bool:
    """Whether the agent's last message waits on the customer: a request to act or to confirm (not "anything
    else?", which a stop answers well)."""
    last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "").lower()
    return any(w in last for w in _WAITS_ON)
