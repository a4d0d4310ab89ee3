"""The agent's speech acts in a customer message (issue 40 §2): flagged in any phrasing, a customer's own not."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.engine.review.speech_acts import agent_acts
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag, Severity

AGENT = [
    ("Let me check your order for you.", "offer"),
    ("I can look that up for you right away.", "offer"),
    ("Allow me to pull up your account details.", "offer"),
    ("I'll go ahead and process the refund for you.", "offer"),
    ("Would you like me to cancel your reservation?", "offer"),
    ("I'll transfer you to a human agent.", "offer"),
    ("I've cancelled your order.", "report"),
    ("I have updated your shipping address.", "report"),
    ("I found your order #W123 in our records.", "report"),
    ("Your reservation has been cancelled and refunded.", "report"),
    ("You are being transferred to a specialist.", "report"),
    ("Could you please verify your email address?", "verify"),
    ("May I have your name and zip code?", "verify"),
    ("To verify your identity, I need your user id.", "verify"),
    ("What's your date of birth?", "verify"),
    ("Thank you for contacting us!", "greet"),
    ("How can I help you today?", "greet"),
    ("Is there anything else I can help you with?", "greet"),
    ("Happy to assist you with that.", "greet"),
    ("Welcome to the store, what can I do for you?", "greet"),
    ("Agent: Sure thing.", "greet"),
    ("I'm here to help you with your order today.", "greet"),
    ("Thanks for reaching out!", "greet"),
    ("For security, could you confirm the email on the account?", "verify"),
    ("All set, the refund has been issued to your card.", "report"),
    ("I went ahead and cancelled it for you.", "report"),
    ("One moment while I pull up your reservation.", "report"),
    ("Can I have your order number please?", "verify"),
]
CUSTOMER = [
    "can you check my order?",
    "I'd like to cancel",
    "yes, please go ahead",
    "Yes, please go ahead and complete everything I asked for with the details I gave you.",
    "Could you cancel my reservation please?",
    "I've restarted my phone.",
    "Let me check my phone settings.",
    "I can confirm you have my email right.",
    "Thanks for your help, have a great day!",
    "What is your return policy?",
    "I need you to check your records for my order.",
    "I did toggle_airplane_mode as you asked. Result: Airplane mode is now OFF.",
    "My email is x@y.com and I'd like you to update my address.",
    "Can you help me?",
    "I checked your website but found nothing.",
    "I want to return the boots and get a refund to my gift card.",
    "You are Yusuf Rossi in zip code 19122. You want to cancel your order.",
    "Is there anything else you need from me?",
    "I'm here to get help with my order.",
    "My order has been cancelled already?",
    "Thanks for your patience, I'm checking my phone now.",
    "I'm waiting while you check your system.",
    "My refund will be processed soon, right?",
    "You want the refund to be credited to your original credit card.",
]


@pytest.mark.parametrize(("text", "act"), AGENT)
def test_the_agents_speech_acts_are_found_in_several_phrasings(text: str, act: str) -> None:
    assert act in agent_acts(text), (text, agent_acts(text))


@pytest.mark.parametrize("text", CUSTOMER)
def test_a_customers_own_speech_acts_are_not_the_agents(text: str) -> None:
    assert agent_acts(text) == [], text


def test_a_customer_speaking_as_the_agent_is_a_finding_with_its_acts() -> None:
    messages = (
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Hi, I need to return something."},
        {"role": "assistant", "content": "Sure, which order?"},
        {"role": "user", "content": "I've located your order and processed the return for you."},
    )
    (finding,) = run_checks(ReviewInput("Return something.", messages, 0.0, first_index=1))
    assert finding.check is ReviewCheck.SPEAKS_AS_AGENT and finding.tags == (ReviewTag.GUIDELINE_VIOLATION,)
    assert finding.severity is Severity.CRITICAL_HINDERED and finding.message_index == 3
    assert "report" in finding.detail
