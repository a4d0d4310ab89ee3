"""The service's speech acts and the stops a freeform customer slips into (``customer_faults_freeform.py``).

Agent acts are what only the service says: offering to look something up, reporting an action taken on the
customer's records, asking the other side to verify its identity, quoting policy as the company, greeting or
closing as the service, asking for the yes/no a write needs, telling the other side to do things on its phone (the
telecom agent's part). They come whole (the role flip of a simulator that continues the transcript as the agent)
or mid-message after a normal answer. A customer asking the agent to check its order is not among them.

Stops follow the reports on τ²'s user simulator: a confirmation with ``###STOP###`` in the same message before the
agent could act (tau2-bench #182, #297), "that's all" before the write, a transfer request mid-task (τ²'s
``###TRANSFER###``), ``###OUT-OF-SCOPE###`` with the information at hand, giving up, a last line glued to the
marker ("I'll do it on the website myself", Toloka/tolokaforge #611), the bare marker, and on telecom a stop instead
of the action on its own phone the agent asked for, or a claim it did it (tau2-bench #41: user action omission).
"""

from __future__ import annotations

import random

__all__ = ["AGENT_ACTS", "CUSTOMER_LEADS", "CUSTOMER_LEADS_DEVICE", "CUSTOMER_TAILS", "stop_text"]

CUSTOMER_LEADS = (
    "Okay, thanks.",
    "Yes, that's right.",
    "Sure.",
    "Alright, sounds good.",
    "Great, thank you!",
    "Yes please.",
    "Got it.",
    "Okay.",
)
CUSTOMER_TAILS = ("", "", "Thanks!", "Let me know.", "Appreciate it.")
CUSTOMER_LEADS_DEVICE = ("Okay, I did that.", "Done.", "Alright, it's done.")
"""What a customer says about an action on its phone (the phone's own report stays in the message)."""

_ALL = ("retail", "airline", "telecom")
_SALES = ("retail", "airline")
AGENT_ACTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "offer_lookup",
        _ALL,
        (
            "Let me pull up your account details real quick.",
            "I can look into that for you right away.",
            "Give me a moment while I check that on my end.",
            "I'll go ahead and look up the details for you.",
        ),
    ),
    (
        "reports_action",
        _SALES,
        (
            "I've processed the exchange and you'll receive a confirmation email shortly.",
            "Your refund has been issued to the original payment method.",
            "I've updated the reservation and the new itinerary has been sent to your email.",
            "The cancellation went through on my end; the amount will be credited within 5 to 7 business days.",
        ),
    ),
    (
        "reports_action",
        ("telecom",),
        (
            "I've reset your network settings from our side, so you should see service come back shortly.",
            "I've added the data to your line and it should be active within a few minutes.",
            "I've re-provisioned your line on our system.",
        ),
    ),
    (
        "verify_identity",
        _ALL,
        (
            "Before I make any changes, could you please confirm your full name and zip code?",
            "For security purposes, can you verify the email address associated with the account?",
            "Can you please provide your user ID so I can authenticate you?",
            "I'll just need to verify your identity first. What's the phone number on the account?",
        ),
    ),
    (
        "policy_as_service",
        _SALES,
        (
            "Per our policy, items can only be exchanged for the same product type.",
            "Unfortunately, I'm not able to modify an order once it has been delivered.",
            "I'm sorry, but basic economy tickets cannot be changed under our policy.",
        ),
    ),
    (
        "asks_confirmation",
        _ALL,
        (
            "Just to confirm, would you like me to proceed with these changes (yes/no)?",
            "Here are the details of the change. Shall I go ahead and submit it?",
            "Please confirm with a yes if you'd like me to proceed.",
        ),
    ),
    (
        "service_greeting",
        _ALL,
        (
            "Is there anything else I can help you with today?",
            "Thank you for contacting us! How may I assist you?",
            "Thanks for your patience, and have a wonderful day!",
            "I hope that resolves everything for you. Don't hesitate to reach out if you need anything else.",
        ),
    ),
    (
        "asks_customer_intent",
        _SALES,
        (
            "Which item would you like to exchange, and what would you like instead?",
            "Would you like the refund to go to the original payment method or to a gift card?",
            "May I ask the reason for the cancellation?",
            "How many passengers will be traveling, and in which cabin?",
        ),
    ),
    (
        "transfers_as_service",
        _ALL,
        (
            "I'm transferring you to a specialist who can help you further.",
            "Please hold while I connect you with a human agent.",
        ),
    ),
    (
        "instructs_device",
        ("telecom",),
        (
            "Could you please restart your device and let me know what the status bar shows?",
            "Please go into your settings and toggle airplane mode off, then check your signal.",
            "Next, could you run a speed test and tell me the result?",
        ),
    ),
    (
        "apologizes_as_service",
        _ALL,
        (
            "I apologize for the inconvenience this has caused, and thank you for bearing with us.",
            "I'm sorry for the trouble; I understand how frustrating this must be.",
        ),
    ),
)
"""shape -> domains -> what the service says."""

_STOPS: dict[str, tuple[str, ...]] = {
    "yes_then_stop": (
        "Yes, please go ahead with that.",
        "Yes, that's correct, go ahead.",
        "Sounds good, do it.",
        "Yes. Thank you so much for your help!",
    ),
    "thats_all": ("That's all I needed, thanks for your help!", "Perfect, that's everything. Thanks!"),
    "gives_up": ("This is taking too long, I'll deal with it another time.", "Never mind, forget it."),
    "wants_human": ("Can I just speak to a human agent, please?", "I'd rather talk to a real person about this."),
    "no_information": ("I'm sorry, I don't have that information.", "I don't know that, sorry."),
    "skips_device_action": ("I'll do that later myself, thanks.", "I can't find that setting. Never mind."),
    "claims_device_action": ("Okay, I've done that and everything works now, thanks!", "Done, it's fixed. Thanks!"),
    "handles_elsewhere": ("That's okay, I'll just do it on the website myself.", "I'll call back later about this."),
    "bare": ("",),
}
_MARKERS = {"wants_human": "###TRANSFER###", "no_information": "###OUT-OF-SCOPE###"}


def stop_text(rng: random.Random, *, tau2: bool, device_asked: bool) -> tuple[str, str, str]:
    """A stopping message: its shape, its text and the marker in it (τ-bench v1 knows ``###STOP###`` only)."""
    shapes = ["yes_then_stop", "thats_all", "gives_up", "wants_human", "handles_elsewhere", "bare"]
    if tau2:
        shapes.append("no_information")
    if device_asked:
        shapes = ["skips_device_action", "claims_device_action", "gives_up", "wants_human"]
    shape = rng.choice(shapes)
    marker = _MARKERS.get(shape, "###STOP###") if tau2 else "###STOP###"
    return shape, f"{rng.choice(_STOPS[shape])} {marker}".strip(), marker
