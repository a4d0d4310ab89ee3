"""A third customer-fault generator, written blind to the review's checks: ``serve-user --faults-set freeform``.

The held-out set for issue 40's final measurement. The same three ``--faults`` kinds as the other sets, written the
way an LLM user simulator (gpt-4.1, Qwen playing τ²'s or τ-bench v1's customer) actually slips, inside otherwise
natural replies rather than one template per kind:

- ``invented_id`` -> an ``invented_fact``: an answer plus a detail the customer was never given, of one of its
  domain's many shapes (``freeform_facts.py``), tested absent from everything it saw (``freeform_grounding.py``);
  on the opening it comes before or after the task; after a device action, after the phone's own report.
  On telecom, after a device action, most often a reading the phone never showed.
- ``as_agent`` -> an ``agent_act``: one of the service's speech acts (``freeform_speech.py``), the whole message
  (a role flip, sometimes two acts in a row) or in the middle of a normal answer.
- ``early_stop`` -> a ``stop``: a stopping message of one of nine shapes in place of an answer; on telecom, also in
  place of the action on its own phone the agent asked for. Never in place of the phone's report of an action it
  did (that action is done: the benchmark counts the report as the customer's write).

Every injected fault is logged (``GET /faults/log``) as ``kind, shape, value, text, turn, scenario, domain`` (plus
``benchmark``, ``agent_asked`` and, for a fact, the ``forms`` tested absent): ``text`` is the message content the
agent receives, ``turn`` the customer's messages the agent saw (a stop is not shown, so not counted), ``scenario``
what the task's opening holds. Shapes and values are drawn from a generator seeded by ``TAU_FAULTS_SEED`` and
the conversation, so a replay says the same.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultKind
from slime_tau_plugin.tools.servers.fake_models import ASK_USER
from slime_tau_plugin.tools.servers.freeform_facts import DEVICE_READINGS, GENERATORS, Fact
from slime_tau_plugin.tools.servers.freeform_grounding import context_of
from slime_tau_plugin.tools.servers.freeform_speech import (
    AGENT_ACTS,
    CUSTOMER_LEADS,
    CUSTOMER_LEADS_DEVICE,
    CUSTOMER_TAILS,
    stop_text,
)

__all__ = ["freeform_fault", "setting_of"]

_STOP_MARK = "###"
_DEVICE_REPORT = "My phone shows:"
"""The scripted customer's report after it ran a tool on its phone: kept whole (it is the customer's write)."""
_ASKS_DEVICE = re.compile(re.escape(ASK_USER) + r" \w+ \{")
_TAU1_AIRLINE = re.compile(r"\b(flight|reservation|airport|baggage|cabin)", re.IGNORECASE)


def setting_of(messages: list[dict[str, Any]], scenario: str) -> tuple[str, str]:
    """(benchmark, domain) of a conversation from the customer's side: τ² names its domain in the scenario."""
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    found = re.search(r"Domain:\s*(\w+)", scenario)
    if "<scenario>" in system:
        return "tau2", found.group(1).lower() if found else "retail"
    return "tau1", "airline" if _TAU1_AIRLINE.search(scenario) else "retail"


def freeform_fault(
    faults: FaultInjector,
    messages: list[dict[str, Any]],
    message: dict[str, Any],
    scenario: str,
    log: list[dict[str, Any]],
) -> dict[str, Any]:
    """``message`` (the customer's next reply) with a drawn freeform fault applied and logged in ``log``."""
    content = str(message.get("content") or "")
    acting = bool(message.get("tool_calls"))
    if not scenario or _STOP_MARK in content or (not content and not acting):
        return message  # a stop is never shown to the agent: a fault there would change nothing
    own = [m for m in messages if m.get("role") == "assistant" and m.get("content")]
    if acting:
        kinds: tuple[FaultKind, ...] = (FaultKind.EARLY_STOP,)  # the customer's write, left undone
    elif not own:
        kinds = (FaultKind.INVENTED_ID,)  # the opening keeps its task, so the episode stays recognisable
    elif _DEVICE_REPORT in content:
        kinds = (FaultKind.INVENTED_ID, FaultKind.AS_AGENT)  # its write is done: a stop in its place would hide it
    else:
        kinds = (FaultKind.INVENTED_ID, FaultKind.AS_AGENT, FaultKind.EARLY_STOP)
    rule = faults.draw(kinds)
    if rule is None:
        return message
    key = json.dumps([faults.spec.seed, rule.kind.value, messages], sort_keys=True, default=str)
    rng = random.Random(hashlib.sha256(key.encode()).digest())
    benchmark, domain = setting_of(messages, scenario)
    last = messages[-1] if messages else {}
    asked = last.get("role") == "user" and bool(_ASKS_DEVICE.match(str(last.get("content") or "")))
    # asked: the agent's last message asks for an action on the phone that has not run yet
    entry: dict[str, Any] = {"scenario": scenario, "domain": domain, "benchmark": benchmark, "agent_asked": asked}
    if rule.kind is FaultKind.EARLY_STOP:
        shape, text, marker = stop_text(rng, tau2=benchmark == "tau2", device_asked=asked)
        entry |= {"kind": "stop", "shape": shape, "value": marker, "text": text, "turn": len(own)}
        log.append(entry)
        return {"role": "assistant", "content": text}
    if rule.kind is FaultKind.INVENTED_ID:
        fact = _fact(messages, content, domain, rng)
        if fact is None:
            return message
        shape, value, text = fact.shape, fact.value, _with(content, fact.sentence, own, rng)
        entry["forms"] = list(fact.forms)  # what was tested absent: a grader can test it again
    else:
        shape, value, text = _agent_act(content, domain, rng)
    entry |= {"kind": "invented_fact" if rule.kind is FaultKind.INVENTED_ID else "agent_act"}
    entry |= {"shape": shape, "value": value, "text": text, "turn": len(own) + 1}
    log.append(entry)
    return {"role": "assistant", "content": text}


def _fact(messages: list[dict[str, Any]], content: str, domain: str, rng: random.Random) -> Fact | None:
    """A fact of the domain's shapes whose every form is absent from what the customer knows (None: none is)."""
    ctx = context_of(messages, content)
    generators = list(GENERATORS.get(domain, GENERATORS["retail"]))
    rng.shuffle(generators)
    if _DEVICE_REPORT in content and rng.random() < 0.7:
        generators = [*DEVICE_READINGS, *generators]  # most often: a reading the phone never showed
    for make in generators:
        for _ in range(3):  # another draw of the same shape before the next shape
            fact = make(ctx, rng)
            if fact is not None and fact.value in fact.sentence and ctx.absent(fact.forms):
                return fact
    return None


def _with(content: str, sentence: str, own: list[dict[str, Any]], rng: random.Random) -> str:
    """The reply with the invented sentence in it: the opening and a device report kept whole, else a short
    answer of the customer's own around it."""
    if not own:
        return rng.choice((f"{content}\n\n{sentence}", f"Hi. {sentence}\n{content}"))
    if _DEVICE_REPORT in content:
        return f"{content}\n{sentence}"
    lead, tail = rng.choice(CUSTOMER_LEADS), rng.choice(CUSTOMER_TAILS)
    return rng.choice((f"{lead} {sentence}", f"{sentence} {lead}", f"{lead} {sentence} {tail}".strip()))


def _agent_act(content: str, domain: str, rng: random.Random) -> tuple[str, str, str]:
    """(shape, the agent-like words, the message): the whole message (one act, or two as a simulator continuing the
    transcript as the agent writes them), or between the customer's own words."""
    acts = [(shape, texts) for shape, domains, texts in AGENT_ACTS if domain in domains]
    shape, texts = rng.choice(acts)
    act = rng.choice(texts)
    if _DEVICE_REPORT in content:
        return shape, act, f"{content}\n{rng.choice(CUSTOMER_LEADS_DEVICE)} {act}"
    if rng.random() < 0.2:
        other_shape, others = rng.choice([(s, t) for s, t in acts if s != shape])
        both = f"{act} {rng.choice(others)}"
        return f"{shape}+{other_shape}", both, both
    lead, tail = rng.choice(CUSTOMER_LEADS), rng.choice(CUSTOMER_TAILS)
    frame = rng.choice((act, f"{lead} {act}", f"{lead} {act} {tail}".strip(), f"{act} {lead}"))
    return shape, act, frame
