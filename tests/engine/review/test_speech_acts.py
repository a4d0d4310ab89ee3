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
    # a record named by a determiner, with a cue that it is done for the other side (issue 40 §2, second round)
    ("I can look into the status of that booking for you if you want.", "offer"),
    ("i'll go ahead and search for the reservation in the system", "offer"),
    ("Ok, I processed the exchange on my end, you'll get an email shortly.", "report"),
    ("All done: I updated the reservation just now.", "report"),
    ("Done, the booking has been changed as requested.", "report"),
    ("I've noted the change on the account.", "report"),
    ("I went ahead and applied the credit to the account.", "report"),
    ("Just a sec, I'm pulling up the account now.", "report"),
    ("I was able to locate the reservation in our system.", "report"),
    ("Bear with me while I pull up the reservation.", "report"),
    ("I'm currently reviewing the reservation and will update you shortly.", "report"),
    ("Alright, the confirmation has been sent to your email.", "report"),
    ("Okay. I've removed the item from the order and updated the total.", "report"),
    ("I'll escalate this to our billing team right away.", "offer"),
    ("ok sounds good ill process that exchange right now for you", "offer"),
    ("I'll initiate the return now and email you the shipping label.", "offer"),
    ("Would you like me to go ahead and rebook that flight for you?", "offer"),
    ("Alright I went ahead and upgraded you to business class.", "report"),
    ("No problem, I'll take care of that for you right now.", "offer"),
    ("I'm reaching out to the billing department on your behalf now.", "report"),
    ("Let's get your booking sorted.", "offer"),
    ("Absolutely, I can assist with that.", "greet"),
    ("Before I can make changes, I'll need the user id on the account.", "verify"),
    ("Could you first confirm the last four digits of the card on file?", "verify"),
    ("Hi there, thanks for getting in touch!", "greet"),
    ("Happy to have helped! Have a great day.", "greet"),
    ("Glad I could help. Anything else?", "greet"),
    ("Let me know if there's anything more I can do for you.", "greet"),
    ("What can I do for you today?", "greet"),
    ("Yes, the blue one please. I've also gone ahead and refunded the difference to your gift card", "report"),
    ("Thanks. Let me double-check the reservation details on our end before we proceed.", "offer"),
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
    # the customer asks the service to act, or reports its own doing (issue 40 §2, second round)
    "I'd like you to cancel it",
    "please verify that the refund went to my card",
    "I turned airplane mode off",
    "I turned off airplane mode and restarted the phone, still no signal.",
    "I checked on my end and still no bars.",
    "Okay, I'll go ahead and reset the APN settings now.",
    "Sure, I'll toggle mobile data for you.",
    "Alright, I've toggled airplane mode off. What should I do next?",
    "Could you look up the status of that order for me?",
    "Can you process the return for me?",
    "I placed the order last week.",
    "I booked the flight myself on the website.",
    "I cancelled the order on the app but it still shows.",
    "Oh I already changed the seat myself online yesterday.",
    "Anything else you need?",
    "Could you confirm the address on file?",
    "Can you tell me the last four digits of the card on file?",
    "My order was cancelled without my consent.",
    "I was told my refund has been issued, but I don't see it.",
    "Great, so my exchange has been processed?",
    "Can you confirm whether the refund has been processed?",
    "Let me find my order number, one second.",
    "I can look for the order number in my email.",
    "I also wonder if I can apply the gift card balance to the order.",
    "I will consider the issue resolved when the status bar shows that I have signal.",
    "Even if the agent says I will not receive a refund for some of them, I want to proceed anyway.",
    "If asked for your zip code, say that it is 98178 first, then say 98186 if an error is found.",
    "You are Sophia Silva. Mention that your flight earlier this month was canceled.",
    "I'll wait while you check.",
    "Thank you for checking that for me.",
    "Thanks for taking care of that.",
    "Sure, give me a moment to find the confirmation email.",
    "I can provide my user id if you need it.",
    "Of course, I'd be glad to verify my identity.",
    "Yes, please go ahead and cancel the order, the reason is that I no longer need it.",
    # real LLM customers (τ-bench's gpt-4o airline trajectories, user turns)
    "Alright, I'll look into that. Thanks for your help!",
    "Do I need to provide any details like reservation ID or anything to proceed?",
    "I don't have the reservation ID with me right now. Anything else I can do?",
    "Is there anything else you can do from your end to help?",
    "I really don't want to cancel my flight, just the insurance. Is there anything else that can be done?",
    "I'm still trying to locate the reservation ID, but could you check if it's possible to make changes?",
    "I would really appreciate help with this refund. Could you check if an exception can be made?",
    "I don't have them handy right now, but I'm looking to cancel flights with only one passenger on the reservation.",
    "Yes, please go ahead and make those changes. I want the refund to be processed to the original payment method.",
    "I'm facing some financial issues, and I'd like to get refunded to the original payment method for each one.",
    "Let's look into any available one-stop options from Atlanta to Las Vegas, please.",
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
