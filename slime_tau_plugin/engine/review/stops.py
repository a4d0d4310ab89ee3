"""A customer that ends the conversation before its task is done: the premature stop (issue 40 §3).

τ's simulated customer ends an episode with a stop marker (``###STOP###``; τ² also ``###TRANSFER###`` and
``###OUT-OF-SCOPE###``). τ scores the databases as they are at that moment, so a customer that stops while the
agent is still working costs the episode its reward, and GRPO then pushes down a policy that did nothing wrong. The
failures τ²'s users report most: the customer answers the agent's "shall I proceed? (yes/no)" and stops in the same
message, or stops without answering it (tau2-bench #182, #297); and in τ² telecom the customer stops instead of
doing, on its own phone, the fix the agent asked it to make.

A stop is *premature* when all hold:

- a write the task requires has not happened. The required writes are τ's own: the task's reference actions that τ
  classes as writes, by the agent (``EnvSession.required_writes``: τ²'s ``ToolType.WRITE``, and every reference
  action of a task scored on ``ACTION``, such as telecom's transfer to a human; τ-bench v1, which has no tool
  types, the reference actions that change its database, v1's own reward measure) *and by the customer*
  (``EnvSession.required_user_writes``: τ² telecom's device fixes, ``Action.requestor == "user"`` and the user
  toolkit's ``ToolType.WRITE``). One is missing when the task holds more of that tool than its side called
  (an errored call counts as made: its failure is not the stop's);
- the episode did not pass. The reference actions are one path to τ's outcome: an episode that passed reached what
  τ checks, whatever path it took, so its stop cut nothing off;
- the agent was waiting on the customer: its last message asked for a confirmation (#297), asked the customer to do
  something (on its device: "please turn Airplane Mode off", "could you reseat your SIM card"; or to tell it
  something), or asked a question that is not a closing "anything else?".

The last condition keeps the agent's failures the agent's (τ²'s rubric: do not blame the customer for the agent's
failures): an agent that refused, gave up, sent the customer elsewhere, or claimed a write it never made and said
goodbye leaves a customer that stops with nothing to wait for, and that episode's reward 0 is a signal to train on.

τ²'s tags: ``premature_termination`` ("ending while the agent was making progress"), and ``missed_required_action``
("a required action not taken") too when the customer stopped instead of doing on its device what the agent asked
and one of its own required writes is undone. Severity ``critical_hindered``
(read off the episode: it failed, and the stop left the required write undone). The finding points at the stop
itself, one past the last message: τ never shows the agent a stop, so it is not in the episode's messages; the
detail quotes it and says which shape it was (a confirmation not given, or given and stopped in the same message;
a device action not done; a question not answered). Imports only ``verdict`` (the check reads a
``checks.ReviewInput`` as a :class:`StopView`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from slime_tau_plugin.engine.review.verdict import Finding, ReviewCheck, ReviewTag, Severity

__all__ = ["StopView", "asks_confirmation", "asks_to_act", "awaits_customer", "missing_writes", "premature_stop"]


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
    def required_user_writes(self) -> tuple[str, ...]: ...
    @property
    def user_calls(self) -> tuple[str, ...]: ...
    @property
    def passed(self) -> bool: ...


_TOOL_CALL = re.compile(r"<tool_call>.*?</tool_call>|<think>.*?</think>", re.S)
_CONFIRM = re.compile(
    r"\bconfirm\b|\bproceed\b|\bgo ahead\b|\byes\s*/\s*no\b|\byes or no\b|\(yes\)|\bshall i\b|\bshould i\b"
    r"|\bwould you like me to\b|\bdo you want me to\b|\bis that (?:correct|right|ok(?:ay)?)\b",
    re.I,
)
_LEAD = r"^\s*(?:(?:now|next|first|then|okay|ok|alright|great|so|finally|also|and|to (?:start|begin|fix this))[,:\s]+)*"
_DEVICE_VERBS = (
    # the verbs of τ² telecom's own user tools (check_, set_, run_, toggle_, reseat_, reset_, connect_, disconnect_,
    # grant_, reboot_, make_) and of τ²'s telecom workflow's "ask the user to ..." steps (change, look, re-seat,
    # rerun, restart, select, try, turn, verify: tests/engine/review/test_premature_stop.py reads both from τ²),
    # and how a phone's settings are reached (go, open, tap, switch ...)
    "check|set|run|rerun|toggle|reseat|re-seat|reset|connect|disconnect|grant|reboot|make|turn|try|look|change"
    "|select|verify|go|open|tap|switch|restart|enable|disable|remove|reinsert|re-insert|insert|take|navigate|allow"
    "|pay|update|install|uninstall|press|power|confirm|tell|provide|share|send|give|read|describe"
)
_IMPERATIVE = (  # "Turn off ...", "Next, please go to Settings"; not a report ("Reset complete.")
    _LEAD
    + r"(?:please\s+|kindly\s+)?(?:"
    + _DEVICE_VERBS
    + r")\b(?!\s+(?:is|was|has|have|complete|completed|done|successful|failed)\b)"
    + r"(?!\s+me\s+(?:a|one)\s+(?:moment|minute|second|sec)\b)"  # "Give me a moment": the agent's own wait
)
_ASKS = (
    r"\b(?:could|would|can|will) you\b(?! like me\b)",  # "could you reseat your SIM card"
    r"\bplease\b(?!\s+(?:note|be aware|hold|wait|bear|allow me|feel free|don'?t hesitate|do not hesitate|visit"
    r"|contact|call|reach out|let (?:me|us) know if you (?:have|need)))",  # not a notice or a referral
    r"\b(?:i need you to|i'?d like you to|i would like you to|i'?ll need you to|you(?:'ll| will)? need to"
    r"|go ahead and|let me know (?:once|when|if it|if that|if this|what|whether|how)"
    r"|tell me (?:what|whether|if|how))\b",
)
_REQUEST = re.compile("|".join((_IMPERATIVE, *_ASKS)), re.I)
_CLOSING = re.compile(
    r"\banything else\b|\bany other (?:questions?|requests?|concerns?|issues?)\b|\bhelp you with (?:today|anything)\b"
    r"|\bhave a (?:great|good|nice|wonderful|lovely) (?:day|one|evening|night|weekend|trip|flight)\b"
    r"|\bfeel free to\b|\bdon'?t hesitate\b|\bdo not hesitate\b|\breach out\b|\bgoodbye\b|\btake care\b"
    r"|\bthanks? (?:you )?for (?:contacting|reaching|calling|your patience|choosing)\b"
    r"|\blet (?:me|us) know if you (?:have|need)\b"
    r"|\bif (?:the|this|that|your|it) (?:\w+ )?(?:persists?|continues?|comes back|happens again)\b|\bin the future\b",
    re.I,
)
_AFFIRM = re.compile(
    r"\b(?:yes|yeah|yep|sure|go ahead|please do|proceed|confirm(?:ed)?|that'?s (?:correct|right))\b", re.I
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def asks_confirmation(agent_text: str) -> bool:
    """The agent's message asks the customer to confirm an action (the tau2-bench #297 pattern)."""
    return any(_CONFIRM.search(s) and not _CLOSING.search(s) for s in _sentences(agent_text))


def asks_to_act(agent_text: str) -> bool:
    """The agent's message asks the customer to do something: an action on its device ("Please turn Airplane Mode
    off", "Could you reseat your SIM card?", "Go to Settings and toggle Data Roaming") or to tell it something."""
    return any(_REQUEST.search(s) and not _CLOSING.search(s) for s in _sentences(agent_text))


def awaits_customer(agent_text: str) -> bool:
    """The agent's message waits on the customer: a confirmation, a request or a question that is not a closing
    offer ("Is there anything else I can help you with?")."""
    for sentence in _sentences(agent_text):
        if _CLOSING.search(sentence):
            continue
        if sentence.rstrip().endswith("?") or _REQUEST.search(sentence) or _CONFIRM.search(sentence):
            return True
    return False


def missing_writes(review: StopView) -> tuple[Counter[str], Counter[str]]:
    """The required writes not made: the agent's, the customer's own (tool -> how many)."""
    agent = Counter(review.required_writes) - Counter(review.agent_calls)
    own = Counter(review.required_user_writes) - Counter(review.user_calls)
    return agent, own


def premature_stop(review: StopView) -> list[Finding]:
    """The customer's stop before a required write while the agent waited on it (see the module docstring)."""
    if review.stop is None or review.passed:
        return []
    agent, own = missing_writes(review)
    if not agent and not own:
        return []
    last = _last_agent_text(review)
    if last is None or not awaits_customer(last):
        return []
    tags: tuple[ReviewTag, ...] = (ReviewTag.PREMATURE_TERMINATION,)
    if asks_confirmation(last) and (agent or not asks_to_act(last)):
        said = _AFFIRM.search(review.stop.replace("###", " "))
        why = (
            "confirmed the agent's action and stopped in the same message (tau2-bench #297)"
            if said
            else "stopped right after the agent asked for a confirmation, without giving it (tau2-bench #297)"
        )
    elif own and asks_to_act(last):
        why = "stopped instead of doing what the agent asked it to do on its own device"
        tags = (*tags, ReviewTag.MISSED_REQUIRED_ACTION)  # τ²'s "a required action not taken": its own
    else:
        why = "stopped while the agent waited on its answer"
    writes = [_named(name, n) for name, n in sorted(agent.items())]
    writes += [_named(name, n) + " (the customer's own)" for name, n in sorted(own.items())]
    stop = " ".join(review.stop.split())[:120]
    detail = f"the customer {why}, before the task's required write ({', '.join(writes)}): {stop!r}"
    return [Finding(ReviewCheck.PREMATURE_STOP, tags, Severity.CRITICAL_HINDERED, len(review.messages), detail)]


def _named(name: str, n: int) -> str:
    return f"{name} x{n}" if n > 1 else name


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
