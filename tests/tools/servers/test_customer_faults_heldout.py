"""The held-out customer faults (``serve-user --faults-set paraphrased``) are what their log says they are.

Real HTTP to ``slime-tau serve-user`` in its own process, conversations built from τ²'s and τ-bench v1's real
tasks and databases (retail, airline, telecom; v1 retail): every held-out kind is injected, each logged entry is
the text the customer sent, every invented value is absent from the customer's grounding sources (instructions,
its own tool results, everything the agent said) and present in what it said, and a clean server injects nothing.
Through slime's ``generate`` (τ² retail, the oracle), each logged text is the episode's customer message and a
stop is logged at the turn the episode ended. The benchmark (``benchmarks/user_review_heldout.py``) trusts exactly
these properties.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from slime_tau_plugin.tools.servers.customer_values import SHAPES, absent
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples
from tests.slime_args import slime_args
from tests.tools.servers.serve_user_process import serve_user as serve_process

pytest.importorskip("tau2")
from tau2.utils.utils import DATA_DIR  # noqa: E402

DOMAINS = Path(DATA_DIR) / "tau2" / "domains"


def serve_user(*args: str, seed: str = "7") -> Iterator[str]:
    """serve-user in its own process with this module's default seed."""
    return serve_process(*args, seed=seed)


@pytest.fixture(scope="module")
def heldout() -> Iterator[str]:
    yield from serve_user("--faults", "invented_id:0.5,as_agent:0.3,early_stop:0.2", "--faults-set", "paraphrased")


@pytest.fixture(scope="module")
def clean() -> Iterator[str]:
    yield from serve_user()


def post(url: str, messages: list[dict]) -> str:
    body = json.dumps({"model": "scripted-user", "messages": messages}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(json.loads(answer.read())["choices"][0]["message"].get("content") or "")


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def conversations() -> Iterator[list[dict]]:
    """Customer-side conversations of real tasks: the opening request, and a later turn after the agent read out
    the customer's real record (and, in telecom, after the customer's own tool ran)."""
    retail = json.loads((DOMAINS / "retail" / "db.json").read_text())
    users = list(retail["users"].values())
    for domain in ("retail", "airline", "telecom"):
        tasks = json.loads((DOMAINS / domain / "tasks.json").read_text())[:14]
        for n, task in enumerate(tasks):
            scenario = f"Domain: {domain}\n{json.dumps(task['user_scenario'])}"
            system = {"role": "system", "content": f"You are a customer.\n<scenario>\n{scenario}\n</scenario>"}
            yield [system, {"role": "user", "content": "Hi! How can I help you today?"}]
            record = json.dumps(users[n])
            later = [system, {"role": "user", "content": "Hi! How can I help you today?"}]
            later += [{"role": "assistant", "content": scenario}, {"role": "user", "content": f"I found: {record}"}]
            if domain == "telecom":
                later += [{"role": "tool", "tool_call_id": "c1", "content": "Airplane Mode: ON, signal 555-123-2002"}]
            yield [*later, {"role": "user", "content": "Could you please confirm you want me to go ahead?"}]
    from tau_bench.envs.retail.tasks_test import TASKS_TEST

    for task in TASKS_TEST[:14]:
        system = {"role": "system", "content": f"You are a user.\n\nInstruction: {task.instruction}\n\nRules:\n- x"}
        yield [system, {"role": "user", "content": "Hi! How can I help you today?"}]


def test_each_kind_is_injected_logged_and_its_values_are_ungrounded(heldout):
    sent = [(messages, post(heldout, messages)) for messages in conversations()]
    log = get(f"{heldout}/faults/log")
    assert log["set"] == "paraphrased"
    entries = log["injected"]
    kinds = Counter(e["kind"] for e in entries)
    assert set(kinds) == {"invented_fact", "agent_act", "stop"}, kinds
    shapes = {e["shape"] for e in entries if e["kind"] == "invented_fact"}
    assert len(shapes) >= 7 and shapes <= set(SHAPES), shapes
    assert len({e["shape"] for e in entries if e["kind"] == "agent_act"}) >= 4
    answers = [text for _, text in sent]
    assert len({e["text"] for e in entries if e["kind"] == "agent_act"}) >= 6  # paraphrased, not one template
    for entry in entries:
        assert entry["text"] in answers  # the log is what the customer said
        messages = next(m for m, text in sent if text == entry["text"])
        if entry["turn"] == 0:
            assert entry["scenario"] and entry["scenario"] in entry["text"]  # the opening keeps its task whole
        if entry["kind"] == "stop":
            assert entry["turn"] > 0 and "###" in entry["text"]
        else:
            own_words = entry["text"].replace(entry["scenario"], "").lower()  # the scenario may speak of "the agent"
            assert "###" not in entry["text"] and "agent" not in own_words
        if entry["kind"] == "invented_fact":
            sources = "\n".join(str(m.get("content") or "") for m in messages)  # instructions, tools, the agent
            assert entry["value"] in entry["text"]
            assert absent(entry["value"], sources), entry
            assert entry["value"].lower() not in sources.lower()
    assert sum(kinds.values()) == sum(get(f"{heldout}/faults")["injected"].values())


def test_a_stop_replaces_a_device_action_the_agent_asked_for(heldout):
    """A telecom customer asked to act on its phone may stop instead of calling its tool (the premature stop)."""
    system = {"role": "system", "content": "<scenario>\nDomain: telecom\nYour phone has no data.\n</scenario>"}
    tools = [{"type": "function", "function": {"name": "toggle_airplane_mode", "parameters": {"type": "object"}}}]
    seen = Counter()
    for n in range(40):
        messages = [system, {"role": "assistant", "content": f"My data is down ({n})."}]
        messages.append({"role": "user", "content": "Could you please do this on your side: toggle_airplane_mode {}"})
        body = json.dumps({"model": "scripted-user", "messages": messages, "tools": tools}).encode()
        request = urllib.request.Request(f"{heldout}/v1/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            message = json.loads(answer.read())["choices"][0]["message"]
        seen["stop" if "###" in str(message.get("content")) else "call" if message.get("tool_calls") else "other"] += 1
    assert seen["stop"] > 0 and seen["call"] > 0 and seen["other"] == 0, seen
    stops = [e for e in get(f"{heldout}/faults/log")["injected"] if "Your phone has no data" in e["scenario"]]
    assert stops and all(e["kind"] == "stop" and e["agent_asked"] for e in stops)


def test_a_clean_server_injects_nothing(clean):
    for messages in conversations():
        text = post(clean, messages)
        assert "###" not in text or text.endswith("###STOP###")
    assert get(f"{clean}/faults/log") == {"set": "templated", "injected": []}
    assert get(f"{clean}/faults")["injected"] == {}


def test_a_server_without_faults_ignores_the_set():
    """``--faults-set paraphrased`` alone injects nothing: the kinds and rates come from ``--faults``."""
    for url in serve_user("--faults-set", "paraphrased"):
        answers = [post(url, messages) for messages in list(conversations())[:10]]
        assert get(f"{url}/faults/log") == {"set": "paraphrased", "injected": []}
        assert not any("###" in a and not a.endswith("###STOP###") for a in answers)


def play_retail(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, spec: str):
    """One τ² retail episode through slime's ``generate`` against the held-out server; the sample and its log."""
    policy = oracle_server_factory(qwen25, (("retail", "train"),))
    faults = FaultInjector(FaultSpec.parse(spec, seed=0), "user")
    user = ChatUserServer(faults=faults, faults_set="paraphrased", max_replies=2).start()
    try:
        extra = {"tau_user": "llm", "tau_user_base_url": user.base_url, "tau_user_model": "scripted-user"}
        args = slime_args(policy, qwen25_dir, tau_max_turns=10, **extra)
        (sample,) = make_samples(tau2_backend, "retail", "train", 1)
        asyncio.run(generate(args, sample, SAMPLING))
        log = get(f"{user.url}/faults/log")["injected"]
    finally:
        user.stop()
    return sample, log


def test_in_an_episode_each_logged_fact_is_a_customer_message(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    sample, log = play_retail(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, "invented_id:1")
    customer = [m["content"] for m in sample.metadata["messages"] if m["role"] == "user"]
    assert len(log) == len(customer) >= 3 and sample.reward == 1.0  # every turn lied; the oracle still passed
    assert [e["text"] for e in log] == customer and log[0]["scenario"] in customer[0]
    assert all(e["kind"] == "invented_fact" and e["value"] in e["text"] for e in log)


def test_in_an_episode_a_stop_is_logged_at_its_turn(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    sample, log = play_retail(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, "early_stop:1")
    customer = [m["content"] for m in sample.metadata["messages"] if m["role"] == "user"]
    assert sample.metadata["termination_reason"] == "user_stop"
    (stop,) = log
    assert stop["kind"] == "stop" and stop["turn"] == len(customer) == 1 and "###" in stop["text"]
    assert stop["text"] not in customer  # a stop is not a message: only the log knows it
