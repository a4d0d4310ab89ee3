"""The roleplay customer faults (``serve-user --faults-set roleplay``) are what their log says they are.

Real HTTP to ``slime-tau serve-user`` in its own process, the customer's side of conversations built from τ²'s real
tasks (retail, airline, telecom) and τ-bench v1's (retail, airline): the service's speech acts are injected in
every domain in many shapes and forms, each logged text is the message the customer sent, the customer's own words
(its opening, its phone's report) stay whole inside it and a stop message is left alone, the ids an act names are
the conversation's own, invented values are absent from all the customer saw, a stop can take the place of a device
action, the kinds it does not play pass unchanged, the same seed and conversation give the same faults, and the CLI
takes ``--faults-set roleplay`` and refuses a bad set in one line.
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
from tests.tools.servers.serve_user_process import CLI
from tests.tools.servers.serve_user_process import serve_user as serve_process

pytest.importorskip("tau2")
from tau2.utils.utils import DATA_DIR  # noqa: E402

DOMAINS = Path(DATA_DIR) / "tau2" / "domains"


def serve_user(*args: str, seed: str = "11") -> Iterator[str]:
    """serve-user in its own process with this module's default seed."""
    return serve_process(*args, seed=seed)


GREETING = {"role": "user", "content": "Hi! How can I help you today?"}
IDS = re.compile(r"#W\d{7}|\bHAT\d{3}\b|\b\d{3}-\d{3}-\d{4}\b")
SPEC = "invented_id:0.2,as_agent:0.8,early_stop:0.1"


def post(url: str, messages: list[dict], tools: list[dict] | None = None) -> dict:
    body = json.dumps({"model": "scripted-user", "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())["choices"][0]["message"]


def log_of(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/faults/log", timeout=30) as answer:
        return json.loads(answer.read())


def scenarios() -> Iterator[tuple[str, str, dict]]:
    """(benchmark, domain, system prompt) of real tasks: τ²'s ``<scenario>``, τ-bench v1's ``Instruction:``."""
    for domain in ("retail", "airline", "telecom"):
        for task in json.loads((DOMAINS / domain / "tasks.json").read_text())[:8]:
            instructions = task["user_scenario"]["instructions"]
            text = "\n".join(f"{k}: {v}" for k, v in instructions.items()) if isinstance(instructions, dict) else ""
            scenario = f"Domain: {domain}\n{text or json.dumps(task['user_scenario'])}"
            system = {"role": "system", "content": f"You are a customer.\n<scenario>\n{scenario}\n</scenario>"}
            yield "tau2", domain, system
    from tau_bench.envs.airline.tasks_test import TASKS as AIRLINE
    from tau_bench.envs.retail.tasks_test import TASKS_TEST as RETAIL

    for domain, tasks in (("retail", RETAIL), ("airline", AIRLINE)):
        for task in tasks[:8]:
            system = {"role": "system", "content": f"You are a user.\n\nInstruction: {task.instruction}\n\nRules:\n- x"}
            yield "tau1", domain, system


def later_turns(system: dict, n: int, domain: str) -> list[list[dict]]:
    """The customer's side after its opening and an agent answer that reads out its records."""
    record = {
        "retail": f"I found order #W20{n}4417 with a t-shirt and a laptop. Is there anything else?",
        "airline": f"Your reservation K{n}Q7ZP is on flight HAT1{n:02d}. Shall I change it?",
        "telecom": f"Your line 555-123-20{n:02d} has mobile data off and airplane mode on. Anything else?",
    }[domain]
    opening = {"role": "assistant", "content": "I need help with my request."}
    first = [system, GREETING, opening, {"role": "user", "content": record}]
    return [first, [*first, {"role": "assistant", "content": "Yes, please."}, {"role": "user", "content": "Done."}]]


@pytest.fixture(scope="module")
def roleplay() -> Iterator[str]:
    yield from serve_user("--faults", SPEC, "--faults-set", "roleplay")


@pytest.fixture(scope="module")
def played(roleplay) -> list[tuple[list[dict], dict, str, str]]:
    """Every conversation posted: (messages, the reply, benchmark, domain)."""
    out = []
    for n, (benchmark, domain, system) in enumerate(scenarios()):
        for messages in ([system, GREETING], *later_turns(system, n, domain)):
            out.append((messages, post(roleplay, messages), benchmark, domain))
    return out


def test_agent_acts_are_injected_in_every_domain_and_logged_as_sent(roleplay, played):
    log = log_of(roleplay)
    assert log["set"] == "roleplay"
    every = log["injected"]
    sent = [str(reply.get("content") or "") for _, reply, _, _ in played]
    assert {e["kind"] for e in every} == {"agent_act", "invented_fact", "stop"}
    entries = [e for e in every if e["kind"] == "agent_act"]
    for entry in every:
        assert entry["text"] in sent, entry  # the logged text is exactly what the agent was sent
        assert entry["value"] and entry["scenario"] and entry["turn"] in (1, 2, 3), entry
        assert any(  # a whole-turn act can be the same text in two conversations: one of them is this one
            r.get("content") == entry["text"]
            and entry["scenario"] in m[0]["content"]
            and entry["turn"] == sum(x["role"] == "assistant" for x in m) + (entry["kind"] != "stop")
            for m, r, _, _ in played
        ), entry
    by_setting = Counter((e["benchmark"], e["domain"]) for e in entries)
    for setting in (("tau2", "retail"), ("tau2", "airline"), ("tau2", "telecom"), ("tau1", "retail")):
        assert by_setting[setting] >= 3, by_setting
    assert by_setting[("tau1", "airline")] >= 3, by_setting
    acts = {act for e in entries for act in e["shape"].split("+")}
    assert len(acts) >= 9, acts
    assert any("+" in e["shape"] for e in entries)  # several acts in one message
    forms = {e["form"].split("/")[0] for e in entries}
    assert {"whole", "head", "tail", "label"} <= forms, forms
    assert {e["form"].split("/")[1] for e in entries} == {"plain", "lower", "markdown"}
    assert any(e["shape"] == "device" and e["domain"] == "telecom" for e in entries)
    assert not any("device" in e["shape"] for e in entries if e["domain"] != "telecom")


@pytest.fixture(scope="module")
def plain(played) -> list[str]:
    """What a customer without faults says in each conversation played."""
    return [str(post(url, m).get("content") or "") for url in serve_user() for m, _, _, _ in played]


def test_the_customers_own_words_stay_whole(roleplay, played, plain):
    """A changed reply is a logged fault; its own words stay in it unless an act took the whole turn, which an
    opening never loses (the benchmark finds the episode by the scenario in it); a stop message is never touched."""
    logged = log_of(roleplay)["injected"]
    entries = {e["text"]: e for e in logged}
    changed = 0
    for (_, reply, _, _), own in zip(played, plain, strict=True):
        text = str(reply.get("content") or "")
        if text == own:
            continue
        changed += 1
        entry = entries[text]
        assert "###" not in own, entry  # a stop's message is not recorded: no fault goes there
        if entry["kind"] == "stop":
            assert text.endswith("###STOP###") and entry["turn"] >= 1, entry
        elif entry.get("form", "").startswith("whole"):
            assert entry["turn"] > 1 and "###" not in own, entry
            assert text == entry["value"]
        else:
            assert own.rstrip() in text and entry["value"] in text, (own, entry)
    assert changed == len(logged) and changed > len(played) // 2


def test_an_act_names_only_the_conversations_own_values(roleplay, played):
    entries = [e for e in log_of(roleplay)["injected"] if e["kind"] == "agent_act"]
    named = 0
    for entry in entries:
        said = [m for m, r, _, _ in played if r.get("content") == entry["text"]]
        seen = "\n".join(str(m.get("content") or "") for messages in said for m in messages)
        for value in IDS.findall(entry["value"]):
            assert value in seen, (value, entry)
            named += 1
    assert named >= 5  # the acts are specific: they name the order, flight or line


def test_invented_values_are_absent_from_what_the_customer_saw(roleplay, played):
    facts = [e for e in log_of(roleplay)["injected"] if e["kind"] == "invented_fact"]
    assert len(facts) >= 8 and len({e["shape"] for e in facts}) >= 6, facts
    for entry in facts:
        said = [m for m, r, _, _ in played if r.get("content") == entry["text"]]
        seen = "\n".join(str(m.get("content") or "") for messages in said for m in messages).lower()
        assert entry["value"] in entry["text"] and entry["value"].lower() not in seen, entry
        digits = re.sub(r"\D", "", entry["value"])
        assert len(digits) < 3 or digits not in re.sub(r"\D", "", seen), entry
        short = [run for run in re.findall(r"\d+", entry["value"]) if len(run) < 3]
        assert not set(short) & set(re.findall(r"\d+", seen)), entry  # a day or minute said nowhere before


def test_a_stop_can_take_the_place_of_a_device_action():
    """Asked to act on its phone, the telecom customer stops instead (its tool call dropped, logged agent_asked)."""
    system = {"role": "system", "content": "<scenario>\nDomain: telecom\nMy phone has no data at all.\n</scenario>"}
    tools = [{"type": "function", "function": {"name": "toggle_airplane_mode", "parameters": {"type": "object"}}}]
    for url in serve_user("--faults", "early_stop:1", "--faults-set", "roleplay"):
        for n in range(4):
            messages = [system, GREETING, {"role": "assistant", "content": f"My data is down ({n})."}]
            messages.append({"role": "user", "content": f"{ASK_USER} toggle_airplane_mode {{}}"})
            reply = post(url, messages, tools)
            assert not reply.get("tool_calls") and str(reply["content"]).endswith("###STOP###"), reply
        stops = log_of(url)["injected"]
        assert len(stops) == 4 and all(e["kind"] == "stop" and e["agent_asked"] and e["turn"] == 1 for e in stops)


def test_the_phones_own_report_stays_whole(roleplay):
    """After its own tool ran, the customer's report ("My phone shows: ...", a write in the benchmark's count) is
    kept first; never replaced by a stop."""
    system = {
        "role": "system",
        "content": "<scenario>\nDomain: telecom\nMy phone is slow and drops calls.\n</scenario>",
    }
    shown = "Airplane Mode is now OFF.\nStatus Bar: Poor | 4G"
    acts = 0
    for n in range(10):
        messages = [system, GREETING, {"role": "assistant", "content": f"My phone is slow ({n})."}]
        messages.append({"role": "user", "content": f"{ASK_USER} toggle_airplane_mode {{}}"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]})
        messages.append({"role": "tool", "tool_call_id": "c", "content": shown})
        text = str(post(roleplay, messages).get("content"))
        assert text.startswith(f"Done. My phone shows: {shown}"), text
        acts += text != f"Done. My phone shows: {shown}"
    assert acts > 0
    entries = [e for e in log_of(roleplay)["injected"] if "slow and drops" in e["scenario"]]
    assert len(entries) == acts and {e["kind"] for e in entries} <= {"agent_act", "invented_fact"}
    assert all(e["turn"] == 2 for e in entries)  # the tool call is no message of the episode: the report is its 2nd


def test_the_kinds_it_does_not_play_pass_unchanged_and_log_nothing(played, plain):
    for url in serve_user("--faults", "pasted_instructions:0.5,loop:0.5", "--faults-set", "roleplay"):
        assert [post(url, m).get("content") for m, _, _, _ in played] == plain
        assert log_of(url)["injected"] == []


def test_the_same_seed_and_conversation_inject_the_same_acts(played):
    for url in serve_user("--faults", SPEC, "--faults-set", "roleplay"):
        again = [post(url, messages) for messages, _, _, _ in played]
        assert [a.get("content") for a in again] == [r.get("content") for _, r, _, _ in played]
    for url in serve_user("--faults", SPEC, "--faults-set", "roleplay", seed="12"):
        other = [post(url, messages).get("content") for messages, _, _, _ in played]
        assert other != [r.get("content") for _, r, _, _ in played]


def test_the_cli_offers_roleplay_and_refuses_a_bad_set_in_one_line():
    assert set(FAULT_SET_CHOICES) == set(FAULT_SETS) and "roleplay" in FAULT_SETS
    done = subprocess.run([*CLI, "--faults-set", "roleplayed"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--faults-set" in lines[0] and "roleplay" in lines[0], done.stderr
