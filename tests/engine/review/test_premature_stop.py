"""The premature stop (issue 40 §3): a customer that ends before the required write while the agent waits on it."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.engine.review.stops import asks_confirmation, asks_to_act, awaits_customer
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag, Severity

CONFIRM = "I can cancel order #W2378156 for the reason 'no longer needed'. Shall I proceed? (yes/no)"
CALL = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}\n</tool_call>'


def episode(last_agent: str, stop: str | None, calls: tuple[str, ...] = ("get_order_details",), reward: float = 0.0):
    messages = (
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Please cancel order #W2378156, I no longer need it."},
        {"role": "assistant", "content": CALL},
        {"role": "tool", "content": "{}"},
        {"role": "assistant", "content": last_agent},
    )
    return ReviewInput(
        "Cancel order #W2378156 because you no longer need it.",
        messages,
        reward,
        first_index=1,
        stop=stop,
        required_writes=("cancel_pending_order",),
        agent_calls=calls,
    )


def test_a_stop_right_after_the_agent_asked_for_confirmation_is_a_critical_premature_stop() -> None:
    (finding,) = run_checks(episode(CONFIRM, "Yes, please. ###STOP###"))
    assert finding.check is ReviewCheck.PREMATURE_STOP
    assert finding.tags == (ReviewTag.PREMATURE_TERMINATION,)
    assert finding.severity is Severity.CRITICAL_HINDERED
    assert finding.message_index == 5  # the stop itself: one past the messages the agent saw
    assert "#297" in finding.detail and "cancel_pending_order" in finding.detail and "###STOP###" in finding.detail


def test_a_stop_while_the_agent_asked_a_question_is_premature_and_a_transfer_counts_as_a_stop() -> None:
    (finding,) = run_checks(episode("Which payment method should the refund go to?", "###TRANSFER###"))
    assert finding.check is ReviewCheck.PREMATURE_STOP and "waited on its answer" in finding.detail


def test_the_297_shapes_say_whether_the_customer_gave_the_confirmation() -> None:
    (given,) = run_checks(episode(CONFIRM, "Yes, go ahead. Thanks! ###STOP###"))
    (not_given,) = run_checks(episode(CONFIRM, "Actually, never mind. ###STOP###"))
    assert "confirmed the agent's action and stopped in the same message" in given.detail
    assert "without giving it" in not_given.detail


def test_an_episode_that_passes_has_no_premature_stop() -> None:
    """The reference actions are one path to τ's outcome: a passed episode reached it, whatever its calls."""
    assert run_checks(episode(CONFIRM, "###STOP###", reward=1.0)) == []


@pytest.mark.parametrize(
    ("last_agent", "stop", "calls"),
    [
        (CONFIRM, None, ("get_order_details",)),  # the customer did not stop (the agent ran out of turns)
        (CONFIRM, "###STOP###", ("get_order_details", "cancel_pending_order")),  # the write happened
        ("Your order is cancelled. Is there anything else I can help you with?", "###STOP###", ()),  # the agent's
        ("I am sorry, I cannot cancel this order.", "Thanks anyway. ###STOP###", ()),  # failures stay the agent's
        ("I can't change that here. Please visit one of our stores for help.", "Okay. ###STOP###", ()),  # sent away
        ("Your order is cancelled. Let me know if you need anything else.", "###STOP###", ()),  # a closing
    ],
)
def test_stops_the_customer_is_not_to_blame_for_are_not_flagged(last_agent: str, stop: str | None, calls) -> None:
    assert run_checks(episode(last_agent, stop, calls)) == []


def test_a_task_without_a_required_write_has_no_premature_stop() -> None:
    review = episode(CONFIRM, "###STOP###")
    bare = ReviewInput(review.instructions, review.messages, 0.0, 1, stop="###STOP###")
    assert run_checks(bare) == []


def test_what_counts_as_waiting_on_the_customer() -> None:
    assert asks_confirmation("Do you want me to go ahead with the exchange?")
    assert not asks_confirmation("Is there anything else I can help you with?")
    assert awaits_customer("Please provide the order id.")
    assert awaits_customer("What is your zip code?")
    assert not awaits_customer("Everything you asked for is done. Is there anything else I can help you with?")
    assert not awaits_customer("Your refund is on its way. Have a great day!")
    assert not awaits_customer("Let me check that for you.")
    assert not awaits_customer("Reset complete. Thank you for contacting us.")
    assert not awaits_customer("Try restarting your phone if the problem persists. Have a great day!")
    assert not awaits_customer("Give me a moment while I look into it.")


@pytest.mark.parametrize(
    "text",
    [
        "Please turn Airplane Mode off and let me know when it's done.",
        "Go to Settings > Network and toggle Data Roaming on.",
        "Next, restart your phone.",
        "Could you reseat your SIM card for me.",
        "I need you to grant the messaging app its storage permission.",
        "Let me know once your phone has restarted.",
    ],
)
def test_a_request_to_act_on_the_device_waits_on_the_customer(text: str) -> None:
    assert asks_to_act(text) and awaits_customer(text)


def test_the_judge_is_shown_the_stop_and_may_point_at_it() -> None:
    from slime_tau_plugin.engine.users.review_judge import conversation_text

    review = episode(CONFIRM, "Yes. ###STOP###")
    text = conversation_text(review.messages, 1, review.stop)
    assert text.splitlines()[-1] == "[5] User: Yes. ###STOP###"
    assert "[5]" not in conversation_text(review.messages, 1)


def test_the_verdict_keeps_the_stop_and_the_guidelines_through_metadata() -> None:
    from slime_tau_plugin.engine.review.verdict import Verdict

    findings = tuple(run_checks(episode(CONFIRM, "Yes. ###STOP###")))
    verdict = Verdict(findings, (ReviewCheck.PREMATURE_STOP,), guidelines="fix.md@0123456789ab", stop="Yes. ###STOP###")
    meta = verdict.as_metadata()
    assert meta["stop"] == "Yes. ###STOP###" and meta["guidelines"] == "fix.md@0123456789ab"
    assert Verdict.from_metadata(meta) == verdict


def test_every_device_fix_tau2_telecom_asks_for_reads_as_a_request(tau2_backend) -> None:
    """From τ²'s own data, not a list of ours: each write tool of the telecom customer (its verb) and each step of
    τ²'s telecom workflow that tells the agent to "ask the user to <verb>" make a request the check waits on."""
    import re

    from tau2.domains.telecom.utils import TELECOM_DATA_DIR

    toolkit = tau2_backend.open(tau2_backend.task_refs("telecom", "test")[0]).env.user_tools
    writes = [name for name in toolkit.tools if toolkit.tool_type(name) == "write"]
    assert len(writes) >= 10
    workflow = "\n".join(p.read_text() for p in TELECOM_DATA_DIR.glob("*.md"))
    asked = set(re.findall(r"(?i)ask (?:the )?users? to ([a-z-]+)", workflow))
    assert len(asked) >= 10
    verbs = {name.split("_")[0] for name in writes} | {verb.lower() for verb in asked}
    missed = [verb for verb in sorted(verbs) if not asks_to_act(f"{verb.capitalize()} it on your phone now.")]
    assert missed == []
    assert all(asks_to_act(f"Could you {name.replace('_', ' ')}?") for name in writes)
