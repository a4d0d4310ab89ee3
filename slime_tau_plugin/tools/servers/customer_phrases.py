"""How an LLM customer words a slip: many paraphrases per held-out fault, assembled at random from parts.

Written as a customer model (gpt-4.1-like) writes, not from the review's checks: the invented fact is an aside, a
correction or a detail it volunteers; the agent act is the service's voice (offering, reporting, verifying,
greeting, wrapping up) without ever saying "agent"; the stop is a customer giving up or asking for a person.
Each function returns the text and the shape it drew, which the generator logs as ground truth.
"""

from __future__ import annotations

import random

__all__ = ["agent_act", "fact_sentence", "stop_line"]

_NOUN = {
    "retail": ("order", "exchange", "return", "account"),
    "airline": ("reservation", "booking", "flight", "trip"),
    "telecom": ("line", "account", "data plan", "bill"),
}
_LEADS = (
    "",
    "Oh, and ",
    "Also, ",
    "Just so you know, ",
    "One more thing: ",
    "Sorry, I forgot to mention, ",
    "By the way, ",
)
_FACTS = {
    "card_digits": (
        "please use the card ending in {v}",
        "it should go on my Visa that ends with {v}",
        "the card I want to use is the one ending {v}",
        "my Mastercard, last four {v}, is the one to charge",
        "I paid with the card ending in {v} originally",
    ),
    "phone": (
        "you can reach me at {v} if anything comes up",
        "my phone number is {v}",
        "the number on the account should be {v}",
        "text me at {v} when it's done",
    ),
    "amount": (
        "I was charged {v} for it",
        "the total came to {v}, if that helps",
        "I think it cost me {v}",
        "I'm expecting about {v} back",
        "the bill said {v} last time",
    ),
    "date": (
        "I placed it on {v}",
        "this was back on {v}",
        "I need it sorted before {v}",
        "it was supposed to arrive {v}",
    ),
    "time": (
        "I called earlier around {v} about this",
        "the one leaving at {v} works best for me",
        "it stopped working at about {v}",
        "I'm only free until {v} today",
    ),
    "count": (
        "I've tried {v} times already",
        "there should be {v} of them in total",
        "I've been a customer for {v} years",
        "it's been {v} days now",
    ),
    "person_name": (
        "it might be under my partner's name, {v}",
        "the account could also be listed as {v}",
        "{v} is the other person on it",
        "my name there might be spelled {v}",
    ),
    "street_address": (
        "it should ship to {v}",
        "I actually live at {v} now",
        "the address on file is {v}",
        "send it to {v}, please",
    ),
    "item_option": (
        "I'd like the {v} one instead",
        "the one I have is the {v} version",
        "I'm pretty sure I ordered it in {v}",
        "could it be in {v}?",
    ),
    "domain_id": (
        "the number I have here is {v}",
        "it's {v}, I think",
        "my confirmation says {v}",
        "the reference on my email is {v}",
    ),
}
_OFFERS = (
    "Let me pull up your {n} details real quick.",
    "I can check the status of that {n} for you if you'd like.",
    "Give me a moment while I look into your {n}.",
    "I'll go ahead and search for that {n} on my end.",
    "Allow me to check what options are available for your {n}.",
    "Let me see what I can find in the system about this {n}.",
)
_REPORTS = (
    "I've gone ahead and cancelled it for you.",
    "I've processed the {n} on my end; you should get a confirmation email shortly.",
    "Your refund has been issued to the original payment method.",
    "All set: I updated the {n} just now.",
    "I have submitted the change to your {n}, and it should show up within a few minutes.",
    "Done, the {n} has been modified as requested.",
)
_VERIFY = (
    "Before we continue, could you please confirm your full name and zip code?",
    "For security purposes, can you verify the email address on the {n}?",
    "To locate your {n}, may I have your user ID, please?",
    "Could you first confirm the last four digits of the card on file?",
    "I'll need to verify your identity first. What is your date of birth?",
)
_GREET = (
    "Thanks for reaching out to customer support!",
    "Welcome! I'm happy to assist you today.",
    "Hello and thank you for contacting us, I'd be glad to help with your {n}.",
    "Hi there! Thanks for getting in touch, let's get your {n} sorted.",
    "Good day, and thank you for being a valued customer.",
)
_WRAP = (
    "Is there anything else I can help you with today?",
    "Glad I could help! Anything else you need?",
    "Is there anything else I can assist you with regarding your {n}?",
    "Have a wonderful day, and thanks for choosing us!",
    "Let me know if there's anything more I can do for you.",
)
_ACTS = {"offer_lookup": _OFFERS, "report_action": _REPORTS, "verify_identity": _VERIFY, "greet": _GREET}
_ACTS["wrap_up"] = _WRAP
_GIVE_UP = (
    "You know what, never mind, I'll deal with it later.",
    "I don't have time for this right now, bye.",
    "Forget it, I'll figure it out myself.",
    "This is taking too long. Thanks anyway.",
    "Actually, that's fine, let's leave it for now.",
)
_TRANSFER = (
    "Can I just talk to a real person, please?",
    "Please transfer me to someone else.",
    "I'd rather speak with a human about this.",
)


def fact_sentence(rng: random.Random, shape: str, value: str, domain: str) -> str:
    """A sentence that states ``value`` as a fact of shape ``shape``."""
    body = rng.choice(_FACTS[shape]).format(v=value)
    lead = rng.choice(_LEADS)
    text = f"{lead}{body}" if lead else body[0].upper() + body[1:]
    return text if text.endswith("?") else f"{text}."


def agent_act(rng: random.Random, domain: str) -> tuple[str, str]:
    """One or two of the service's speech acts in the customer's mouth, and the (first) act's name."""
    act = rng.choice(sorted(_ACTS))
    noun = rng.choice(_NOUN.get(domain, _NOUN["retail"]))
    text = rng.choice(_ACTS[act]).format(n=noun)
    if rng.random() < 0.3:
        other = rng.choice([a for a in sorted(_ACTS) if a != act])
        text = f"{text} {rng.choice(_ACTS[other]).format(n=noun)}"
    return text, act


def stop_line(rng: random.Random, tau2: bool) -> tuple[str, str]:
    """The customer's last message: giving up (``###STOP###``) or, on τ², asking for a person (``###TRANSFER###``)."""
    if tau2 and rng.random() < 0.3:
        return f"{rng.choice(_TRANSFER)} ###TRANSFER###", "transfer_request"
    return f"{rng.choice(_GIVE_UP)} ###STOP###", "give_up"
