"""``serve-user --faults-set slips``: a customer drifting into the agent's persona, over real HTTP (issue 40).

A ``slime-tau serve-user`` subprocess with ``TAU_FAULTS_SEED`` answers conversations of every τ domain. Each
injection is an agent act whose log entry (``GET /faults/log``) carries the message's exact text, its turn, the
scenario and the domain, as ``benchmarks/user_review_heldout.py``'s ground truth reads it; the opening, a message
with ``###`` and a telecom device report are never touched; the same conversation gets the same slip.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.servers.chat_user_server import CONTINUE, ChatUserServer
from slime_tau_plugin.tools.servers.fake_models import ASK_USER
from tests.tools.cli.test_cli_rollout import assert_one_line_error, free_port, slime_tau
from tests.tools.servers.serve_user_process import serve_user

SPEC = "invented_id:1.0,as_agent:1.0,early_stop:1.0"  # only as_agent plays in this set
SCENARIOS = {
    "tau2/retail": "Domain: retail\nReason for call: You received your order #W2378156 and wish to exchange the "
    "mechanical keyboard for a clicky one.\nKnown info: You are Yusuf Rossi in zip code 19122.",
    "tau2/airline": "Domain: airline\nReason for call: You want to cancel reservation EHGLP3.\nKnown info: You are "
    "Emma Kim. Your user id is emma_kim_9957.",
    "tau2/telecom": "Domain: telecom\nReason for call: Your mobile data is not working.\nKnown info: You are John "
    "Smith with phone number 555-123-2002.",
    "tau1/retail": "You are Mei Davis in 80217. You want to return the water bottle from order #W2890441.",
    "tau1/airline": "Your user id is mia_li_3668. You want to fly from New York to Seattle on May 20 in economy.",
}
DEVICE_TOOLS = [{"type": "function", "function": {"name": "toggle_airplane_mode", "parameters": {"type": "object"}}}]


def system(domain: str) -> dict[str, str]:
    scenario = SCENARIOS[domain]
    if domain.startswith("tau2"):
        return {"role": "system", "content": f"# User simulation guidelines\n<scenario>\n{scenario}\n</scenario>"}
    return {"role": "system", "content": f"You are a user.\nInstruction: {scenario}\n\nRules:\n- be brief"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    yield from serve_user("--faults", SPEC, "--faults-set", "slips", seed="11")


def say(base: str, messages: list[dict[str, Any]], tools: list | None = None) -> dict[str, Any]:
    body = json.dumps({"model": "scripted-user", "messages": messages, **({"tools": tools} if tools else {})})
    request = urllib.request.Request(base + "/v1/chat/completions", body.encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=30).read())["choices"][0]["message"]


def get(base: str, path: str) -> Any:
    return json.loads(urllib.request.urlopen(base + path, timeout=10).read())


def conversation(domain: str, agent_turns: int) -> list[dict[str, Any]]:
    """The simulator's view after its opening and ``agent_turns`` agent messages (its own replies in between)."""
    messages = [system(domain), {"role": "assistant", "content": SCENARIOS[domain]}]
    for k in range(agent_turns):
        if k:
            messages.append({"role": "assistant", "content": "Sure, that works for me."})
        messages.append({"role": "user", "content": f"Thanks. I am looking into it now (step {k + 1})."})
    return messages


def test_every_domain_gets_an_agent_act_logged_with_its_exact_text(server: str):
    before = len(get(server, "/faults/log")["injected"])
    said = {domain: say(server, conversation(domain, 1))["content"] for domain in SCENARIOS}
    log = get(server, "/faults/log")
    new = log["injected"][before:]
    assert log["set"] == "slips"
    assert [e["domain"] for e in new] == list(SCENARIOS)
    for entry in new:
        assert entry["kind"] == "agent_act"
        assert entry["text"] == said[entry["domain"]]  # what the ground truth matches the episode by
        assert entry["scenario"] == SCENARIOS[entry["domain"]]
        assert entry["turn"] == 2 and entry["shape"]
        assert "###" not in entry["text"]
    assert get(server, "/faults")["injected"]["as_agent"] >= len(new)
    assert get(server, "/faults")["injected"]["invented_id"] == 0


def test_the_same_conversation_gets_the_same_slip(server: str):
    messages = conversation("tau2/airline", 2)
    first, again = say(server, messages)["content"], say(server, messages)["content"]
    assert first == again
    other = [say(server, conversation(d, 2))["content"] for d in SCENARIOS]
    assert len(set(other)) == len(other)  # and another conversation its own


def test_opening_stop_and_device_report_are_never_touched(server: str):
    before = len(get(server, "/faults/log")["injected"])
    for domain, scenario in SCENARIOS.items():
        assert say(server, [system(domain)])["content"] == scenario  # the opening, which the truth matches on
        assert "###STOP###" in say(server, conversation(domain, 3))["content"]  # past --max-replies: a stop
    ask = conversation("tau2/telecom", 1)
    ask[-1] = {"role": "user", "content": f'{ASK_USER} toggle_airplane_mode {{"on": false}}'}
    call = say(server, ask, DEVICE_TOOLS)
    assert call.get("tool_calls") and not call.get("content")
    result = [*ask, call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "Airplane: off"}]
    assert say(server, result, DEVICE_TOOLS)["content"].startswith("Done. My phone shows: Airplane: off")
    assert get(server, "/faults/log")["injected"][before:] == []


def test_a_bad_faults_set_is_one_line_exit_2():
    done = slime_tau(["serve-user", "--faults-set", "slipz", "--port", str(free_port())])
    assert_one_line_error(done, "--faults-set", "slips", command="serve-user")


def test_invented_id_and_early_stop_play_nothing_in_this_set():
    spec = FaultSpec.parse("invented_id:1.0,early_stop:1.0", seed=11)
    with ChatUserServer(max_replies=2, faults=FaultInjector(spec, "user"), faults_set="slips") as served:
        for domain in SCENARIOS:
            assert say(served.url, conversation(domain, 1))["content"] == CONTINUE
        assert get(served.url, "/faults/log")["injected"] == []
        assert set(get(served.url, "/faults")["injected"].values()) == {0}
