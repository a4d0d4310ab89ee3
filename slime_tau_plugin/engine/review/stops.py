"""A customer that ends the conversation before its task is done: the premature stop (issue 40 §3).

τ's simulated customer ends an episode with a stop marker (``###STOP###``; τ² also ``###TRANSFER###`` and
``###OUT-OF-SCOPE###``). τ scores the database as it is at that moment, so a customer that stops while the agent
is still working costs the episode its reward, and GRPO then pushes down a policy that did nothing wrong. The
failure τ²'s users report most is the customer that answers the agent's "shall I proceed? (yes/no)" and stops in
the same message, before the agent could make the write (tau2-bench #182, #297).

A stop is *premature* when both hold:

- a write the task requires has not happened: the task's reference actions by the agent that τ itself classes as
  writes (``EnvSession.required_writes``: τ²'s ``ToolType.WRITE``; τ-bench v1, which has no tool types, the
  reference actions that change its database, v1's own reward measure) outnumber the agent's calls of that tool;
- the agent was waiting on the customer: its last message asked for a confirmation, or asked the customer
  something other than a closing "anything else?".

The second condition keeps the agent's failures the agent's (τ²'s rubric: do not blame the customer for the
agent's failures): an agent that refused, gave up, or claimed a write it never made and said goodbye leaves a
customer that stops with nothing to wait for, and that episode's reward 0 is a signal to train on.

τ²'s tag: ``premature_termination`` ("ending while the agent was making progress"). Severity, read off the episode
like the structural checks': ``critical_hindered`` when the episode did not pass (the stop cost the reward) and
``minor`` when it passed anyway (the write the stop cut off did not decide τ's reward). The finding points at the
stop itself, one past the last message: τ never shows the agent a stop, so it is not in the episode's messages;
the detail quotes it. Imports only ``verdict`` (the check reads a ``checks.ReviewInput`` as a :class:`StopView`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from slime_tau_plugin.engine.review.verdict import Finding, ReviewCheck, ReviewTag, Severity

__all__ = ["StopView", "asks_confirmation", "awaits_customer", "premature_stop"]


class StopView(Protocol):
    """What the check reads of ``checks.ReviewInput`` (a protocol: ``checks`` imports this module)."""

    @property
    def messages(self) -> Sequence[dict[str, Any]]: ...
    @property
    def stop(self) -> str | None: ...
    @property
    def required_writes(self) -> tuple[str, ...]: ...
    @property
    def agent_calls(self) -> tuple[str, ...]: ...
    @property
    def passed(self) -> bool: ...


_TOOL_CALL = re.compile(r"<tool_call>.*?</tool_call>|<think>.*?</think>", re.S)
_CONFIRM = re.compile(
    r"\bconfirm\b|\bproceed\b|\bgo ahead\b|\byes\s*/\s*no\b|\(yes\)|\bshall i\b|\bshould i\b"
    r"|\bwould you like me to\b|\bdo you want me to\b|\bis that (?:correct|right|ok(?:ay)?)\b",
    re.I,
)
_REQUEST = re.compile(
    r"^\s*(?:could|would|can|will) you\b|^\s*please (?:provide|confirm|tell|share|send|give|let me know|do|try|check)"
    r"|\bcould you please\b|\bplease let me know\b",
    re.I,
)
_CLOSING = re.compile(
    r"\banything else\b|\bany other (?:questions?|requests?|concerns?)\b|\bhelp you with (?:today|anything)\b"
    r"|\bhave a (?:great|good|nice) day\b",
    re.I,
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def asks_confirmation(agent_text: str) -> bool:
    """The agent's message asks the customer to confirm an action (the tau2-bench #297 pattern)."""
    return any(_CONFIRM.search(s) and not _CLOSING.search(s) for s in _sentences(agent_text))


def awaits_customer(agent_text: str) -> bool:
    """The agent's message waits on the customer: a confirmation, a question or a request that is not a closing
    offer ("Is there anything else I can help you with?")."""
    for sentence in _sentences(agent_text):
        if _CLOSING.search(sentence):
            continue
        if sentence.rstrip().endswith("?") or _REQUEST.search(sentence) or _CONFIRM.search(sentence):
            return True
    return False


def premature_stop(review: StopView) -> list[Finding]:
    """The customer's stop before a required write while the agent waited on it (see the module docstring)."""
    if review.stop is None or not review.required_writes:
        return []
    done = Counter(review.agent_calls)
    missing = Counter(review.required_writes) - done
    if not missing:
        return []
    last = _last_agent_text(review)
    if last is None or not awaits_customer(last):
        return []
    why = (
        "right after the agent asked for a confirmation (tau2-bench #297)"
        if asks_confirmation(last)
        else "while the agent waited on its answer"
    )
    writes = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(missing.items()))
    detail = f"the customer ended the conversation {why}, before the task's required write ({writes}): " + repr(
        " ".join(review.stop.split())[:120]
    )
    severity = Severity.MINOR if review.passed else Severity.CRITICAL_HINDERED
    tags = (ReviewTag.PREMATURE_TERMINATION,)
    return [Finding(ReviewCheck.PREMATURE_STOP, tags, severity, len(review.messages), detail)]


def _last_agent_text(review: StopView) -> str | None:
    """What the agent last said to the customer (its tool calls and reasoning left out), or None."""
    for message in reversed(review.messages):
        if message.get("role") != "assistant":
            continue
        text = _TOOL_CALL.sub(" ", str(message.get("content") or "")).strip()
        if text:
            return text
    return None


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.findall(text) if s.strip()]
