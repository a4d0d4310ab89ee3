"""The service's asks and stances in a customer message (issue 40 §2, third attempt): asking the other side to
choose or to say yes before a write, apologising for the company, stating policy as the company, telling the other
side what to do on its phone. Each feature has its customer side: a real customer asks, apologises for itself,
quotes policy it read and reports what it did on its own phone."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.review.speech_acts import agent_acts

AGENT = [
    # the other side's choice among its options or records
    ("Which of your orders would you like to return?", "ask"),
    ("Would you prefer a refund to the original payment method or a gift card?", "ask"),
    ("Which payment method would you like the refund to go to?", "ask"),
    ("Could you tell me which reservation you'd like to change?", "ask"),
    ("What would you like to exchange it for?", "ask"),
    ("May I ask the reason for the cancellation?", "ask"),
    ("How many passengers will be traveling, and in which cabin?", "ask"),
    ("Are you looking to exchange it for a different size, or get a refund?", "ask"),
    ("Let me know which of the orders you'd like me to cancel.", "ask"),
    # the yes/no before a write
    ("Please reply 'yes' to confirm the cancellation.", "ask"),
    ("Before I make this change, please confirm you understand the fee.", "ask"),
    ("Can I go ahead and process this for you?", "ask"),
    ("Alright, I'll need an explicit yes from you before I cancel the reservation.", "ask"),
    ("If everything looks correct, reply with yes and I'll book it.", "ask"),
    ("Shall I submit the return request now?", "ask"),
    ("Should I proceed with the exchange? Please answer yes or no.", "ask"),
    ("Do you want me to cancel the whole order or just the one item?", "ask"),
    ("Just to confirm, would you like me to proceed with these changes (yes/no)?", "ask"),
    ("Please confirm with a yes if you'd like me to go ahead.", "ask"),
    ("Do I have your permission to make this change?", "ask"),
    ("Before I finalize this, do you agree to the change fee?", "ask"),
    # apologising for the company's failure, to the other side
    ("We apologize for the delay with your order.", "apologize"),
    ("I'm sorry about the mix-up on our end.", "apologize"),
    ("Sorry for any confusion this may have caused you.", "apologize"),
    ("My apologies for the trouble with your reservation.", "apologize"),
    ("I sincerely apologize for the inconvenience caused to you.", "apologize"),
    ("I'm sorry for the trouble; I understand how frustrating this must be.", "apologize"),
    ("I completely understand your frustration, and I apologize.", "apologize"),
    # policy as the company
    ("Per the terms of your fare, changes aren't permitted.", "policy"),
    ("As a silver member, you're entitled to one free checked bag.", "policy"),
    ("I'm afraid that isn't something we can do.", "policy"),
    ("Unfortunately, per airline policy, the ticket is non-refundable.", "policy"),
    ("I'm sorry, but that falls outside of what I'm allowed to do.", "policy"),
    ("Items that have been opened cannot be returned, I'm afraid.", "policy"),
    ("Our policy only allows one exchange per order.", "policy"),
    ("We can only refund to the original payment method.", "policy"),
    ("Unfortunately we cannot change basic economy flights.", "policy"),
    ("Unfortunately, we're not able to cancel orders that have already shipped.", "policy"),
    ("Unfortunately, I'm not able to modify an order once it has been delivered.", "policy"),
    ("I'm afraid I can't process a refund for a delivered order.", "policy"),
    # the other side's device
    ("Please toggle your airplane mode off and on.", "instruct"),
    ("Go to your settings and turn on data roaming.", "instruct"),
    ("Could you please restart your device and let me know what the status bar shows?", "instruct"),
    ("Next, could you run a speed test and tell me the result?", "instruct"),
    ("Please check your APN settings and let me know what they say.", "instruct"),
    ("Try turning your wifi calling off and then call me back.", "instruct"),
    ("Now tap on Network settings and select reset.", "instruct"),
    ("Let's try something: turn your phone off, wait ten seconds, and turn it back on.", "instruct"),
    ("Can you swipe down and tell me if airplane mode is enabled?", "instruct"),
    ("Head into Settings > Mobile Data and make sure it's toggled on.", "instruct"),
    ("Once you've done that, check whether you have bars again.", "instruct"),
    ("First, make sure your phone is not in airplane mode.", "instruct"),
    ("Could you try removing and reinserting your SIM card?", "instruct"),
]

CUSTOMER = [
    # customers' own questions
    "Which option is cheaper?",
    "Would a gift card be faster?",
    "Which of my orders has the blender in it?",
    "Can I get the refund on a gift card instead?",
    "Do you want my user id or my email?",
    "Do you want me to read you the order number?",
    "Shall I send you the order number?",
    "Can you tell me which flight is earlier?",
    "What are my options here?",
    # real gpt-4 customers (τ-bench trajectories) a draft of the check flagged
    "Can we proceed with the downgrade now?",
    "I'm sorry, but I don't remember my reservation ID. Can we proceed without it?",
    "I noticed a potential policy where only one certificate might be used per reservation. How should we proceed?",
    "If basic economy can't be changed, can we cancel the current booking and book a new one instead?",
    "I'm not entirely sure about the IATA code for my local airport. I apologize for the inconvenience.",
    "This is really frustrating. Are there truly no other options available?",
    "Thank you for your patience!",
    # asks about what the other side wants to know, or advice on its own next step
    "What else would you like to know?",
    "Is that what you want?",
    "Do you need me to confirm anything else?",
    "Should I return it or exchange it?",
    "Should I go ahead and return it myself?",
    "Would you like the confirmation code from the email?",
    "Which card will the refund go to?",
    "I'm looking to exchange it for a different size.",
    "Let me know which of my orders can still be cancelled.",
    "Can I go ahead and use my gift card for this?",
    "Everything looks right, please submit the change.",
    # apologies for itself
    "Sorry, I forgot my order number.",
    "Sorry for the confusion, I meant the other order.",
    "I apologize, I gave you the wrong zip code.",
    # policy it read or its own limits
    "Your policy says I can return within 30 days.",
    "The website said you can only refund to the original payment method.",
    "I'm not able to cancel the order on the website myself.",
    "We can only travel on Monday.",
    # its own phone
    "Do I need to restart my phone?",
    "Should I restart my phone first?",
    "Should I go ahead and restart the device?",
    "I went to settings and toggled airplane mode.",
    "I turned airplane mode off and restarted my phone, still no signal.",
    "Okay, I toggled it. What should I do next?",
    "I'm not able to find the setting on my phone.",
    "I tried turning wifi calling off but nothing changed.",
    "Should I tap on network settings and reset?",
    "We can't make the earlier flight, can we keep the later one?",
    "Apologies for the delay, I was looking for my order number.",
    "Sorry, your website wasn't working so I called.",
    "Sorry, what was your question?",
    "Sorry to make this difficult for you.",
    "We only book refundable tickets.",
    "I completely understand, thanks for explaining.",
    "As a silver member, I should get one free checked bag, right?",
    "The terms of my fare say changes aren't permitted?",
    "I turned my phone off, waited ten seconds, and turned it back on.",
    "I went into Settings > Mobile Data and it's toggled on now.",
    "I have bars again!",
    "Yes, you have my explicit yes to cancel the reservation.",
    "I'm sorry, I'm not allowed to share that.",
    "Is the ticket non-refundable per airline policy?",
    "I removed and reinserted the SIM card, still nothing.",
    "Please make sure my new address is saved.",
    # a real gpt-4 customer restating a rule as its reason; a customer restating it plainly
    "Since the basic economy flights cannot be upgraded, I don't need any further changes at this moment.",
    "Basic economy tickets cannot be changed.",
    "The website says items that have been opened cannot be returned.",
    "Restart done, the status bar shows no signal.",
]


@pytest.mark.parametrize(("text", "act"), AGENT)
def test_the_services_asks_and_stances_are_found(text: str, act: str) -> None:
    assert act in agent_acts(text), agent_acts(text)
    assert act in agent_acts(f"Okay, thanks. {text.lower().rstrip('.')}")  # mid-message, lowercase


@pytest.mark.parametrize("text", CUSTOMER)
def test_a_customers_questions_apologies_and_own_device_are_not_the_services(text: str) -> None:
    assert agent_acts(text) == []


# Fourth attempt: the persona an LLM user simulator drifts into, read by features (a record inspected by the
# speaker, a particle after a pronoun, the company's voice in an apology, options laid out, a choice asked, a
# summary of the request, an act "in our system", a transfer in other words, a role label on a later line).
AGENT_4 = [
    "I'd be happy to look that up for you.",
    "Let me check the details of the order.",
    "Sure, I can check on order #W7209932, give me just a second.",
    "Let me take a quick look at the booking.",
    "let me take a look at the line ending in 2002 real quick",
    "I'm so sorry for the inconvenience with the booking, we apologize for the trouble this has caused.",
    "I sincerely apologize for any frustration, I understand how annoying this must be for you.",
    "On behalf of the company, I apologize for the delay.",
    "Sorry about the mix-up on our side; we'll make it right.",
    "I understand your concern, and I want to make sure this gets resolved.",
    "Here are your options:\n1. Exchange it for a different size\n2. Return it for a refund",
    "Here are a couple of options for you: a full refund or store credit.",
    "You have two options here: keep the current flight or switch to the 3pm one.",
    "Which would you prefer?",
    "Which option works best for you?",
    "Would the 10am or the 4pm departure suit you better?",
    "Let me connect you with a specialist, one moment please.",
    "Let me get you over to our baggage department.",
    "I've turned on roaming for the line ending in 2002 in our system.",
    "Here's what I found:\n- Order #W1234567: delivered\n- Order #W7654321: pending",
    "Good news: your exchange was approved!",
    "Here's a summary of what we discussed: you'd like to cancel reservation ABC123.",
    "So, just to confirm, you'd like to return the blender and get a refund to the gift card.",
    "Please allow 5-7 business days for the refund to appear on your statement.",
    "Your return request has been received.",
    "As your assistant, my goal is to get this sorted out today.",
    "To assist you better, could you share the order you're calling about?",
    "Your satisfaction is our top priority.",
    "Thanks for bearing with me while I checked on that.",
    "Rest assured, we'll get this resolved for you.",
    "According to our records, the payment went through on the 12th.",
    "I'm really sorry you've had to deal with this.",
    "Here's what I can offer: a voucher for $100 or a full refund.",
    "You can choose between a refund to your card or a gift card.",
    "Do you have a preference between the two?",
    "One moment please while I verify a few details.",
    "I'm afraid that fare class isn't eligible for changes.",
    "Let me hand you off to a colleague who specializes in billing.",
    "Just to recap: you're returning the keyboard and keeping the mouse, correct?",
    "Could you please toggle airplane mode off and on again for me?",
    "Your refund is on its way.",
    "To wrap things up: the order is cancelled and the refund is on its way to your Visa.",
    "Option A: keep the order as is. Option B: cancel and rebook. Let me know which you'd like.",
    "Would you rather have store credit or a refund?",
    "The change fee for this has been waived as a courtesy.",
    "You're eligible for a full refund since it's within 24 hours of booking.",
    "Let me loop in our technical team on this.",
    "I'll need to verify a couple of things first, what's the email on the account?",
    "Before we continue, could you read me the last four digits of the payment card?",
    "Let me know if you have any other questions about your reservation.",
    "I'm showing that the order was delivered on the 5th.",
    "I want to make this right for you.",
    "Our team will follow up with you within 48 hours.",
    "Which card should I put the refund on?",
    "Your account shows two open orders.",
    "You'll receive a text once the technician is scheduled.",
    "For your security, I can't share the full card number.",
]
CUSTOMER_4 = [
    "I understand, thanks for explaining.",
    "Great, that works for me.",
    "Certainly, my zip code is 28236.",
    "Sorry about that, I gave you the wrong number.",
    "Here's my order number: W2611340.",
    "I'd be happy to provide my zip code if you need it.",
    "Could you take a quick look at order W2611340?",
    "Can you look up my reservation 3RK2T9?",
    "I'll look for those details. I hope there will be some resolution.",
    "Understood, I'll look for that information.",
    "I would like to add one checked bag as well.",
    "Let me check the booking confirmation in my inbox.",
    "I can check on the order status later myself.",
    "Let me look at the options and get back to you.",
    "I understand your concern about security, here's my zip: 28236.",
    "Which one do you think is best?",
    "Which would be cheaper for me, the refund or the credit?",
    "What are my options here?",
    "We apologize for calling so late, my husband and I had a question.",
    "Good news, I found my receipt.",
    "Here's what I found in my email: order W2611340.",
    "Please connect me with a supervisor.",
    "I was told to allow 5-7 business days for the refund.",
    "Do you know if you'd like to verify my email first?",
    "Your name is Omar Silva. For #W9673784 order that you've placed you'd like to exchange the espresso machine.",
    "Agent said the refund would go to my card.",
    "Let me look that up, one sec.",
    "I'll look into it and get back to you.",
    "Thanks for your patience while I checked my email.",
    "Thanks so much for your help. I've confirmed the address on my end, it's correct.",
    "I'll flag this to my bank too.",
    "I've noted that down, thanks.",
    "We're unable to make the earlier flight.",
    "Do you have a preference for which ID I give you?",
    "One moment please while I find my card.",
    "I'm afraid my ticket isn't eligible, is it?",
    "Just to recap, I'm returning the keyboard and keeping the mouse.",
    "Could you check that for me?",
    "Sorry you have to deal with all my changes.",
    "Is my refund on its way?",
    "Could you waive the fee as a courtesy?",
    "Am I eligible for a full refund?",
    "Let me loop in my wife, she booked it.",
    "What's the email you have for me?",
    "The last four digits of my card are 4821.",
    "Let me know if you need anything else from me.",
    "It's showing that the order was delivered, but I never got it.",
    "I have my email and my zip, let me know which you'd like.",
    "What would you like to have me do next?",
    "I want you to make this right for me.",
    "Will your team follow up with me?",
    "Which card should I use for the payment?",
    "Where should I send the item back to?",
    "My account shows two open orders.",
    "Will I receive a text once it's scheduled?",
    "For my security, please don't read out the card number.",
]


@pytest.mark.parametrize("text", AGENT_4)
def test_the_persona_a_simulator_drifts_into_is_found(text: str) -> None:
    assert agent_acts(text), text
    assert agent_acts(f"Yes, please go ahead.\n\n{text}"), text  # after the customer's own words


@pytest.mark.parametrize("text", CUSTOMER_4)
def test_a_customers_politeness_and_own_records_are_not_the_services(text: str) -> None:
    assert agent_acts(text) == []


def test_a_role_label_on_a_later_line_is_a_continued_transcript() -> None:
    assert "greet" in agent_acts("Yes, please go ahead.\n\nAgent: > I apologize for the delay.")
    assert agent_acts("Yes, please go ahead. The agent: told me it was fine.") == []
