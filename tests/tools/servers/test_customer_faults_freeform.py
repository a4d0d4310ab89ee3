"""The freeform customer faults (``serve-user --faults-set freeform``) are what their log says they are.

Real HTTP to ``slime-tau serve-user`` in its own process, the customer's side of conversations built from τ²'s real
tasks (retail, airline, telecom) and τ-bench v1's (retail, airline): each kind is injected in every domain, each
logged text is the message the customer sent, each invented value is in that message and absent from everything
the customer saw (tested twice: by the generator's forms, and as plain text), a stop on telecom can take the place
of the device action the agent asked for, the same seed and conversation give the same faults, and the CLI takes
``--faults-set freeform`` and refuses a bad set in one line.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_tau_plugin.tools.cli.commands.serve_user import FAULT_SET_CHOICES
from slime_tau_plugin.tools.servers.chat_user_server import FAULT_SETS
from slime_tau_plugin.tools.servers.fake_models import ASK_USER
from slime_tau_plugin.tools.servers.freeform_grounding import context_of
from tests.tools.servers.serve_user_process import CLI
from tests.tools.servers.serve_user_process import serve_user as serve_process

pytest.importorskip("tau2")
from tau2.utils.utils import DATA_DIR  # noqa: E402

DOMAINS = Path(DATA_DIR) / "tau2" / "domains"


def serve_user(*args: str, seed: str = "11") -> Iterator[str]:
    """serve-user in its own process with this module's default seed."""
    return serve_process(*args, seed=seed)


GREETING = {"role": "user", "content": "Hi! How can I help you today?"}


SPEC = "invented_id:0.45,as_agent:0.5,early_stop:1"
"""Every later turn gets a fault (the last rule always fires), the opening an invented fact about half the time."""


@pytest.fixture(scope="module")
def freeform() -> Iterator[str]:
    yield from serve_user("--faults", SPEC, "--faults-set", "freeform")


def post(url: str, messages: list[dict], tools: list[dict] | None = None) -> dict:
    body = json.dumps({"model": "scripted-user", "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["choices"][0]["message"]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def scenarios() -> Iterator[tuple[str, str, dict]]:
    """(benchmark, domain, system prompt) of real tasks: τ²'s ``<scenario>``, τ-bench v1's ``Instruction:``."""
    for domain in ("retail", "airline", "telecom"):
        for task in json.loads((DOMAINS / domain / "tasks.json").read_text())[:8]:
            instructions = task["user_scenario"]["instructions"]
            text = "\n".join(f"{k}: {v}" for k, v in instructions.items()) if isinstance(instructions, dict) else ""
            scenario = f"Domain: {domain}\n{text or json.dumps(task['user_scenario'])}"
            yield (
                "tau2",
                domain,
                {"role": "system", "content": f"You are a customer.\n<scenario>\n{scenario}\n</scenario>"},
            )
    from tau_bench.envs.airline.tasks_test import TASKS as AIRLINE
    from tau_bench.envs.retail.tasks_test import TASKS_TEST as RETAIL

    for domain, tasks in (("retail", RETAIL), ("airline", AIRLINE)):
        for task in tasks[:8]:
            yield (
                "tau1",
                domain,
                {"role": "system", "content": f"You are a user.\n\nInstruction: {task.instruction}\n\nRules:\n- x"},
            )


def later_turn(system: dict, n: int) -> list[dict]:
    """The customer's side after its opening and an agent answer that reads out a record (ids it may misremember)."""
    opening = {"role": "assistant", "content": "I need help with my request."}
    record = f"I found reservation K{n}Q7ZP and order #W20{n}4417 for you. Is there anything else?"
    return [system, GREETING, opening, {"role": "user", "content": record}]


@pytest.fixture(scope="module")
def played(freeform) -> list[tuple[list[dict], dict, str, str]]:
    """Every conversation posted: (messages, the reply, benchmark, domain)."""
    out = []
    for n, (benchmark, domain, system) in enumerate(scenarios()):
        for messages in ([system, GREETING], later_turn(system, n)):
            out.append((messages, post(freeform, messages), benchmark, domain))
    return out


def test_each_kind_is_injected_in_every_domain_and_logged_as_sent(freeform, played):
    log = get(f"{freeform}/faults/log")
    assert log["set"] == "freeform"
    entries = log["injected"]
    sent = [str(reply.get("content") or "") for _, reply, _, _ in played]
    assert {e["kind"] for e in entries} == {"invented_fact", "agent_act", "stop"}
    for entry in entries:
        assert entry["text"] in sent, entry  # the logged text is exactly what the agent was sent
        assert entry["scenario"] and entry["value"] in entry["text"], entry
        if entry["kind"] == "stop":
            assert re.search(r"###(STOP|TRANSFER|OUT-OF-SCOPE)###", entry["text"]) and entry["turn"] == 1
        else:
            assert "###" not in entry["text"] and entry["turn"] in (1, 2)
    by_setting = Counter((e["benchmark"], e["domain"], e["kind"]) for e in entries)
    for benchmark, domain in (("tau2", "retail"), ("tau2", "airline"), ("tau2", "telecom"), ("tau1", "retail")):
        assert by_setting[(benchmark, domain, "invented_fact")] > 0, by_setting
    assert by_setting[("tau1", "airline", "invented_fact")] > 0, by_setting
    assert all(e["value"] == "###STOP###" for e in entries if e["benchmark"] == "tau1" and e["kind"] == "stop")
    assert len({e["shape"] for e in entries if e["kind"] == "invented_fact"}) >= 8
    assert len({e["shape"] for e in entries if e["kind"] == "agent_act"}) >= 4


def test_invented_values_are_absent_from_what_the_customer_saw(freeform, played):
    entries = get(f"{freeform}/faults/log")["injected"]
    facts = [e for e in entries if e["kind"] == "invented_fact"]
    assert len(facts) >= 20
    for entry in facts:
        messages, reply, _, _ = next(p for p in played if p[1].get("content") == entry["text"])
        ctx = context_of(messages)
        assert ctx.absent(entry["forms"]), entry
        seen = "\n".join(str(m.get("content") or "") for m in messages).lower()
        assert entry["value"].lower() not in seen, entry  # plain text too: not only the generator's own test
        assert entry["scenario"] in messages[0]["content"]


def test_a_stop_can_take_the_place_of_a_device_action(freeform):
    """Asked to act on its phone, the telecom customer either calls its tool or stops (logged, agent_asked)."""
    system = {"role": "system", "content": "<scenario>\nDomain: telecom\nMy phone has no data at all.\n</scenario>"}
    tools = [{"type": "function", "function": {"name": "toggle_airplane_mode", "parameters": {"type": "object"}}}]
    seen = Counter()
    for n in range(6):
        messages = [system, GREETING, {"role": "assistant", "content": f"My data is down ({n})."}]
        messages.append({"role": "user", "content": f"{ASK_USER} toggle_airplane_mode {{}}"})
        reply = post(freeform, messages, tools)
        seen["stop" if "###" in str(reply.get("content")) else "call" if reply.get("tool_calls") else "other"] += 1
    assert seen == {"stop": 6}, seen  # early_stop:1 fires on every device action
    stops = [e for e in get(f"{freeform}/faults/log")["injected"] if "no data at all" in e["scenario"]]
    assert len(stops) == 6 and all(e["kind"] == "stop" and e["agent_asked"] and e["turn"] == 1 for e in stops)


def test_the_phones_own_report_stays_whole_in_a_faulty_message(freeform):
    """After its own tool ran, the customer's report ("My phone shows: ...", its write in the benchmark's count) is
    kept and the fault comes after it; a fact there is often a reading the phone never showed."""
    system = {
        "role": "system",
        "content": "<scenario>\nDomain: telecom\nMy phone is slow and drops calls.\n</scenario>",
    }
    shown = "Airplane Mode is now OFF.\nStatus Bar: 📶² Poor | 4G | 🔋 80%"
    for n in range(12):
        messages = [system, GREETING, {"role": "assistant", "content": f"My phone is slow ({n})."}]
        messages.append({"role": "user", "content": f"{ASK_USER} toggle_airplane_mode {{}}"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]})
        messages.append({"role": "tool", "tool_call_id": "c", "content": shown})
        text = str(post(freeform, messages).get("content"))
        assert text.startswith(f"Done. My phone shows: {shown}"), text
    entries = [e for e in get(f"{freeform}/faults/log")["injected"] if "slow and drops" in e["scenario"]]
    assert {e["kind"] for e in entries} == {"invented_fact", "agent_act"}  # never a stop (its rate is 1)
    facts = [e for e in entries if e["kind"] == "invented_fact"]
    assert all(e["value"] not in shown and e["turn"] == 2 for e in facts)
    assert not any(e["agent_asked"] for e in entries)  # the action it was asked for has run


def test_the_same_seed_and_conversation_inject_the_same_faults(played):
    """A second server with the same seed, sent the same conversations in the same order, logs the same faults."""
    for url in serve_user("--faults", SPEC, "--faults-set", "freeform"):
        again = [post(url, messages) for messages, _, _, _ in played]
        assert [a.get("content") for a in again] == [r.get("content") for _, r, _, _ in played]
    for url in serve_user("--faults", SPEC, "--faults-set", "freeform", seed="12"):
        other = [post(url, messages).get("content") for messages, _, _, _ in played]
        assert other != [r.get("content") for _, r, _, _ in played]


def test_grounding_finds_a_value_in_any_of_its_written_forms():
    ctx = context_of([{"role": "system", "content": "You live in zipcode 94107, order #W2378156, id C1014."}])
    assert not ctx.absent(["94107"])  # "nine four one zero seven" is grounded by the digits
    assert not ctx.absent(["#W2378156"]) and ctx.absent(["#W2378157"])
    assert ctx.absent(["14"])  # a day is not grounded by the digits inside an id
    dated = context_of([{"role": "user", "content": "Your flight is on the fourteenth, at gate 7."}])
    assert not dated.absent(["14"]) and not dated.absent(["7"]) and dated.absent(["8"])
    assert not ctx.absent(["Live in ZIPCODE"]) and ctx.absent(["Larkspur Lane"])


def test_the_cli_offers_freeform_and_refuses_a_bad_set_in_one_line():
    assert set(FAULT_SET_CHOICES) == set(FAULT_SETS) and "freeform" in FAULT_SETS
    done = subprocess.run([*CLI, "--faults-set", "handwritten"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--faults-set" in lines[0] and "freeform" in lines[0], done.stderr
