"""The deterministic checks: cheap enough for every episode, run on the finished conversation.

Each check reads a :class:`ReviewInput` and returns :class:`Finding` values; none raises on odd text. How a finding
gets its severity (τ² defines it by the outcome, which a string check cannot see, so it is read off the episode):

- an *invented identifier* (a fact-like span grounded in neither the instructions, the conversation so far nor the
  customer's own tools: ``facts.py``, ``grounding.py``) that a later agent tool call carries is critical:
  ``critical_helped`` when the episode passed (the customer handed over what the task withholds),
  ``critical_hindered`` when it failed; one no agent call used is ``minor``;
- a *structural* error (the customer speaking as the agent, the same message past ``repeat_limit`` in a row, an
  empty or garbled reply) is ``critical_hindered`` when the episode did not pass and ``minor`` when it passed anyway;
- *pasted instructions* after the opening (30+ words of the instructions verbatim) is ``minor``: it reveals what the
  customer is meant to say anyway; τ²'s judge rubric decides whether it made the task easy.

The stand-ins' fixed "go ahead" answer (:data:`GO_AHEAD`) is never a loop. The opening is never checked for pasted
instructions: the stand-in customers (``tau_user=scripted`` and
``serve-user``) open with their whole scenario by design, and that opening is the instructions themselves.
Imports only ``facts``, ``stops`` and ``verdict``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.review.facts import Fact, stated_facts
from slime_tau_plugin.engine.review.grounding import Grounding, appears_in
from slime_tau_plugin.engine.review.speech_acts import agent_acts
from slime_tau_plugin.engine.review.stops import premature_stop
from slime_tau_plugin.engine.review.verdict import Finding, ReviewCheck, ReviewTag, Severity

__all__ = ["CHECKS", "DEFAULT_CHECKS", "GO_AHEAD", "PASTE_WORDS", "ReviewInput", "run_checks"]

PASTE_WORDS = 30
"""Consecutive words of the instructions that make a later customer message a paste."""
PASS_REWARD = 1.0 - 1e-6
GO_AHEAD = "Yes, please go ahead and complete everything I asked for with the details I gave you."
"""The stand-in customers' fixed answer (``ScriptedUser.CONTINUE``, ``serve-user``'s): repeating it is what they are
built to do, so it never counts as a loop."""


@dataclass(frozen=True, slots=True)
class ReviewInput:
    """One finished episode as the review sees it."""

    instructions: str
    """The customer's task instructions (τ's user scenario)."""
    messages: tuple[dict[str, Any], ...]
    """The episode's messages (``EpisodeResult.messages``): system, user, assistant (raw model text), tool."""
    reward: float
    """τ's reward (0 for an episode that ended unscored)."""
    first_index: int = 0
    """The first message the simulator wrote (a task that starts mid-conversation has τ's history before it)."""
    tool_outputs: tuple[str, ...] = ()
    """What the customer's own tools showed it."""
    repeat_limit: int = 3
    stop: str | None = None
    """The customer's last words when it ended the episode (τ's stop marker in them), else None (``stops.py``)."""
    required_writes: tuple[str, ...] = ()
    """The tools of the task's reference writes by the agent, as τ classes them (``EnvSession.required_writes``)."""
    agent_calls: tuple[str, ...] = ()
    """The tools the agent called, in order (errors included)."""
    required_user_writes: tuple[str, ...] = ()
    """The tools of the task's reference writes by the customer (τ² telecom's device fixes:
    ``EnvSession.required_user_writes``)."""
    user_calls: tuple[str, ...] = ()
    """The tools the customer ran on its own device, in order (errors included)."""

    @property
    def passed(self) -> bool:
        return self.reward >= PASS_REWARD

    def customer_turns(self) -> list[tuple[int, str]]:
        return [
            (i, str(m.get("content") or ""))
            for i, m in enumerate(self.messages)
            if i >= self.first_index and m.get("role") == "user"
        ]


def _structural(review: ReviewInput) -> Severity:
    return Severity.MINOR if review.passed else Severity.CRITICAL_HINDERED


def invented_identifiers(review: ReviewInput) -> list[Finding]:
    """Facts the customer could not have known when it stated them: what it sees is its instructions, its own tool
    results and the conversation as τ² shows it to the customer (agent text without tool calls, its own words);
    never the agent's system prompt or the agent's tool results."""
    known = Grounding([review.instructions, *review.tool_outputs])
    findings: list[Finding] = []
    for i, message in enumerate(review.messages):
        text = str(message.get("content") or "")
        role = message.get("role")
        if role == "assistant":
            known.add(_TOOL_CALL.sub(" ", text))
        if role != "user":
            continue
        if i >= review.first_index:
            invented = [f for f in stated_facts(text) if not known.knows(f)]
            if invented:
                used = [f for f in invented if _acted_on(review.messages, i, f)]
                if used:
                    severity = Severity.CRITICAL_HELPED if review.passed else Severity.CRITICAL_HINDERED
                else:
                    severity = Severity.MINOR
                shown = ", ".join(f"{f.label} {f.text}" for f in (used or invented))
                what = "; a later agent tool call used it" if used else ""
                detail = f"{shown}: in neither the instructions nor the conversation so far{what}"
                findings.append(
                    Finding(ReviewCheck.INVENTED_IDENTIFIER, (ReviewTag.HALLUCINATION,), severity, i, detail)
                )
        known.add(text)
    return findings


_TOOL_CALL = re.compile(r"<tool_call>.*?</tool_call>", re.S)


def _acted_on(messages: Sequence[dict[str, Any]], after: int, fact: Fact) -> bool:
    """A later agent turn that called a tool (a ``tool`` message follows it) carries ``fact`` (in normal form)."""
    for j in range(after + 1, len(messages) - 1):
        m = messages[j]
        if m.get("role") == "assistant" and messages[j + 1].get("role") == "tool":
            calls = " ".join(_TOOL_CALL.findall(str(m.get("content")))) or str(m.get("content"))
            if appears_in(fact, calls):
                return True
    return False


def speaks_as_agent(review: ReviewInput) -> list[Finding]:
    """The customer performs the agent's speech acts (``speech_acts.py``): offers to look things up or act for
    the other side, reports actions on the other side's records, asks the other side to verify its identity,
    greets or closes as the service (a role label or a tool call included), asks the other side to choose or to say
    yes before a write, apologises or states policy as the company, tells the other side what to do on its phone
    (``speech_asks.py``)."""
    out = []
    for i, text in review.customer_turns():
        acts = agent_acts(text)
        if acts:
            detail = f"the customer speaks as the agent ({', '.join(acts)}): {text[:80]!r}"
            out.append(
                Finding(ReviewCheck.SPEAKS_AS_AGENT, (ReviewTag.GUIDELINE_VIOLATION,), _structural(review), i, detail)
            )
    return out


def repeated_messages(review: ReviewInput) -> list[Finding]:
    """The same customer message more than ``repeat_limit`` times in a row (a loop): one finding, at the first
    repeat past the limit."""
    run, last = 0, None
    for i, text in review.customer_turns():
        if text == GO_AHEAD:
            run, last = 0, None
            continue
        key = " ".join(text.lower().split())
        run = run + 1 if key == last else 1
        last = key
        if run == review.repeat_limit + 1:
            detail = f"the same message {run} times in a row (limit {review.repeat_limit}): {text[:80]!r}"
            tags = (ReviewTag.GUIDELINE_VIOLATION,)
            return [Finding(ReviewCheck.REPEATED_MESSAGE, tags, _structural(review), i, detail)]
    return []


_SPECIAL = re.compile(r"<\|[a-z_]+\|>|</?s>|\[/?INST\]|<\|?(?:im_start|im_end|eot_id|endoftext)\|?>")
_CHAR_RUN = re.compile(r"(\S)\1{19,}")
STUCK_REPEATS = 8
"""A word or a group of up to three words this many times in a row is a stuck generation."""


def empty_or_garbled(review: ReviewInput) -> list[Finding]:
    """An empty reply, one with no letters, chat-template tokens, replacement characters or a stuck repeat."""
    out = []
    for i, text in review.customer_turns():
        why = _garbled(text)
        if why:
            out.append(Finding(ReviewCheck.EMPTY_REPLY, (ReviewTag.GUIDELINE_VIOLATION,), _structural(review), i, why))
    return out


def _garbled(text: str) -> str | None:
    stripped = text.strip()
    if not stripped:
        return "an empty customer message"
    if not re.search(r"[^\W\d_]", stripped):
        return f"a customer message with no words: {stripped[:40]!r}"
    special = _SPECIAL.search(stripped)
    if special:
        return f"chat-template text in the customer message: {special.group(0)!r}"
    if stripped.count("\ufffd") >= 3:
        return "undecodable characters in the customer message"
    run = _CHAR_RUN.search(stripped)
    if run:
        return f"a stuck repeat in the customer message: {run.group(0)[:40]!r}"
    stuck = _stuck_words(stripped.split())
    return f"a stuck repeat in the customer message: {stuck!r}" if stuck else None


def _stuck_words(words: list[str]) -> str | None:
    """The first 1-3 word group repeated :data:`STUCK_REPEATS` times in a row (linear in the words)."""
    for size in (1, 2, 3):
        run = 1
        for k in range(size, len(words) - size + 1, size):
            run = run + 1 if words[k : k + size] == words[k - size : k] else 1
            if run >= STUCK_REPEATS:
                return " ".join(words[k : k + size])[:40]
    return None


def pasted_instructions(review: ReviewInput) -> list[Finding]:
    """A customer message after the opening that repeats ``PASTE_WORDS`` words of the instructions verbatim."""
    words = review.instructions.lower().split()
    grams = {tuple(words[k : k + PASTE_WORDS]) for k in range(len(words) - PASTE_WORDS + 1)}
    out = []
    for n, (i, text) in enumerate(review.customer_turns()):
        if n == 0 or not grams:
            continue
        said = text.lower().split()
        if any(tuple(said[k : k + PASTE_WORDS]) in grams for k in range(len(said) - PASTE_WORDS + 1)):
            tags = (ReviewTag.REVEALED_INFO_EARLY, ReviewTag.GUIDELINE_VIOLATION)
            detail = f"{PASTE_WORDS}+ words of the instructions pasted verbatim after the opening"
            out.append(Finding(ReviewCheck.PASTED_INSTRUCTIONS, tags, Severity.MINOR, i, detail))
    return out


CHECKS: dict[ReviewCheck, Callable[[ReviewInput], list[Finding]]] = {
    ReviewCheck.INVENTED_IDENTIFIER: invented_identifiers,
    ReviewCheck.SPEAKS_AS_AGENT: speaks_as_agent,
    ReviewCheck.REPEATED_MESSAGE: repeated_messages,
    ReviewCheck.EMPTY_REPLY: empty_or_garbled,
    ReviewCheck.PASTED_INSTRUCTIONS: pasted_instructions,
    ReviewCheck.PREMATURE_STOP: premature_stop,
}
"""``tau_review_checks`` names -> the check. A new check is a function here and a ``ReviewCheck`` member."""
DEFAULT_CHECKS = tuple(CHECKS)
"""On by default: each measured at precision 1.0 on clean runs (benchmarks/user_review.md)."""


def run_checks(review: ReviewInput, checks: Sequence[ReviewCheck] = DEFAULT_CHECKS) -> list[Finding]:
    """Every finding of the named checks, in message order."""
    found = [finding for check in checks for finding in CHECKS[check](review)]
    return sorted(found, key=lambda f: (f.message_index, f.check.value))
