"""A customer that answers well-formed and wrong: the faults the review (``engine/review/``) must catch.

The chat user server (``chat_user_server.py``) passes each content reply through :func:`customer_fault`, which draws
one of ``faults/spec.py``'s ``CUSTOMER_KINDS`` (``invented_id``, ``pasted_instructions``, ``as_agent``, ``loop``,
``early_stop``) at its rate. Each leaves a marker a benchmark can find in the episode's messages (the injected
ground truth): the sentence :data:`INVENTED`, the scenario pasted after the opening, :data:`AS_AGENT_LINE`,
:data:`LOOP_LINE`, :data:`EARLY_STOP_LINE`. A stuck customer (``loop``) stays stuck for the rest of its episode
without a new draw. The opening gets only the faults that keep the task recognisable (``invented_id``,
``as_agent``). Values are drawn from the conversation itself, so a replay injects the same text.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultKind

__all__ = ["AS_AGENT_LINE", "EARLY_STOP_LINE", "INVENTED", "LOOP_LINE", "customer_fault"]

INVENTED = "Also, for your records, my {kind} is {value}."
AS_AGENT_LINE = "Agent: Thank you for contacting us! How can I help you today?"
LOOP_LINE = "I still need help with my request, can you please do it?"
EARLY_STOP_LINE = "Never mind, I have to go now. ###STOP###"
STOP_MARK = "###"
"""What τ's stop markers start with (``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``)."""
_OPENING_KINDS = (FaultKind.INVENTED_ID, FaultKind.AS_AGENT)
_LATER_KINDS = (*_OPENING_KINDS, FaultKind.PASTED_INSTRUCTIONS, FaultKind.LOOP, FaultKind.EARLY_STOP)


def customer_fault(
    faults: FaultInjector, messages: list[dict[str, Any]], message: dict[str, Any], scenario: str
) -> dict[str, Any]:
    """``message`` (the customer's next reply) with a drawn customer fault applied; tool calls pass unchanged."""
    content = message.get("content")
    if not content or message.get("tool_calls"):
        return message
    own = [str(m.get("content")) for m in messages if m.get("role") == "assistant" and m.get("content")]
    if own and own[-1] == LOOP_LINE:
        return {**message, "content": LOOP_LINE}  # stuck, even where it would have stopped: no new draw
    if STOP_MARK in str(content):
        return message  # a stop is never shown to the agent: a fault there would change nothing
    rule = faults.draw(_LATER_KINDS if own else _OPENING_KINDS)
    if rule is None:
        return message
    text = str(content)
    if rule.kind is FaultKind.INVENTED_ID:
        text = f"{text} {_invented(messages)}"
    elif rule.kind is FaultKind.AS_AGENT:
        text = f"{AS_AGENT_LINE}\n{text}"
    elif rule.kind is FaultKind.PASTED_INSTRUCTIONS and scenario:
        text = f"To be clear, here is everything: {scenario}\n{text}"
    elif rule.kind is FaultKind.LOOP:
        text = LOOP_LINE
    elif rule.kind is FaultKind.EARLY_STOP:
        text = EARLY_STOP_LINE
    return {**message, "content": text}


def _invented(messages: list[dict[str, Any]]) -> str:
    """An identifier no τ task has (seeded by the conversation, so a replay says the same)."""
    digest = hashlib.sha256(repr([m.get("content") for m in messages]).encode()).digest()
    rng = random.Random(digest)
    kind, value = rng.choice(
        [
            ("order number", f"#W0{rng.randrange(10**6):06d}"),
            ("email", f"jordan.vale{rng.randrange(10**4)}@example.org"),
            ("zip code", f"0{rng.randrange(10**4):04d}"),
            ("user id", f"jordan_vale_{rng.randrange(1000, 10**4)}"),
        ]
    )
    return INVENTED.format(kind=kind, value=value)
