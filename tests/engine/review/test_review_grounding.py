"""A customer that lies in its own words, through ``generate``: real HTTP, real τ² retail, the oracle (issue 40).

The customer is our chat user server with a reply of the test's: the scripted customer's own turns with a
paraphrased invented fact or an agent's speech act added, or its facts restated in other written forms. The review
must flag the first two (``hallucination`` / ``guideline_violation``) and leave the third alone.
"""

from __future__ import annotations

import asyncio
import re

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants
from tests.slime_args import slime_args


def play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, change) -> Sample:
    """One τ² retail train episode whose customer's k-th content turn is ``change(k, text)``."""
    policy = oracle_server_factory(qwen25, (("retail", "train"),))

    def reply(messages, tools):
        message = scripted_user_reply(messages, tools, 1)
        if message.get("content") and "###" not in message["content"]:
            own = sum(1 for m in messages if m.get("role") == "assistant" and m.get("content"))
            message = {**message, "content": change(own, message["content"])}
        return message

    user = ChatUserServer(reply=reply).start()
    try:
        args = slime_args(
            policy,
            qwen25_dir,
            tau_user="llm",
            tau_user_base_url=user.base_url,
            tau_user_model="scripted-user",
            tau_max_turns=10,
        )
        (sample,) = make_samples(tau2_backend, "retail", "train", 1)
        asyncio.run(generate(args, sample, SAMPLING))
    finally:
        user.stop()
    assert_sample_invariants(sample)
    return sample


def findings(sample: Sample) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in sample.metadata["tau_review"]["findings"]:
        out.setdefault(f["check"], []).append(f)
    return out


def test_a_paraphrased_invented_fact_is_flagged(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    def lie(turn: int, text: str) -> str:
        return f"{text} Oh, and the card I paid with ends in 4417, I bought it on March 3rd." if turn == 0 else text

    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, lie)
    (finding,) = findings(sample)["invented_identifier"]
    assert finding["tags"] == ["hallucination"] and "4417" in finding["detail"] and "March 3rd" in finding["detail"]
    assert finding["severity"] == "minor" and not sample.remove_sample  # no agent call carried it: kept, marked
    assert "4417" in sample.metadata["messages"][finding["message_index"]]["content"]


def test_an_agent_speech_act_in_the_customers_words_is_flagged(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    def act(turn: int, text: str) -> str:
        done = "Great news, I've processed the exchange on your order, anything else I can do for you?"
        return done if turn else text

    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, act)
    (finding,) = findings(sample)["speaks_as_agent"]
    assert finding["tags"] == ["guideline_violation"] and "report" in finding["detail"]
    assert "invented_identifier" not in findings(sample)


def test_a_customer_restating_its_facts_in_other_forms_is_not_flagged(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    def restate(turn: int, text: str) -> str:
        if turn == 0:
            ids = " ".join(re.findall(r"#W(\d{7})", text))
            return f"{text}\nTo repeat: order W{ids}, and yes, please go ahead." if ids else text
        return "Yes, please go ahead."

    sample = play(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, restate)
    assert sample.status is Sample.Status.COMPLETED
    assert sample.metadata["tau_review"]["findings"] == []
