"""The service's speech acts as a drifting LLM customer writes them (``customer_faults_slips.py``'s wording).

A 7B-70B model playing the customer slides into the assistant persona it was trained on: it opens with
"Certainly!", restates the request back, reports what "I" did on the other side's records, lists the booking,
offers options, asks for identity or a yes/no before a write, escalates, promises business days. Each shape here
is a few skeletons per τ domain with slots filled from the conversation's own values (:class:`Values`), so the
slip names the real order, reservation or phone number as the role-flipped model would. Written without reading
the review's checks, so the wording is not tuned to them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Values:
    """What the conversation names, with plain fallbacks a model would write when it has none."""

    domain: str  # retail, airline or telecom
    name: str = "there"
    order: str = "your order"
    reservation: str = "your reservation"
    user_id: str = "your account"
    phone: str = "your line"
    item: str = "the item"
    place: str = "your destination"
    date: str = "the date you mentioned"


_OPENERS = (
    "Certainly! I'd be glad to assist with that.",
    "Absolutely, happy to help with that!",
    "Great question!",
    "Of course! I'd be more than happy to help.",
    "I understand your concern.",
    "Thank you for your patience.",
    "Sure thing!",
    "I completely understand how frustrating this must be.",
    "Thanks for reaching out about this.",
    "No problem at all!",
)
_CLOSERS = (
    "Is there anything else I can assist you with today?",
    "Let me know if there's anything else I can help with!",
    "Is there anything else you need help with?",
    "Thank you for contacting us, and have a wonderful day!",
    "Feel free to reach out if you have any other questions.",
    "Have a great day! 😊",
    "Anything else I can do for you today?",
)

# shape -> domain ("any" for every domain) -> skeletons; {slots} come from Values
SHAPES: dict[str, dict[str, tuple[str, ...]]] = {
    "pleasantry": {"any": _OPENERS + _CLOSERS},
    "greeting": {
        "any": (
            "Hello {name}! Thank you for reaching out. How can I help you today?",
            "Hi there, welcome! What can I do for you today?",
            "Good day! I'm here to help. What brings you in today?",
            "hi! how can i help u today",
        ),
    },
    "restate": {
        "retail": (
            "Just to make sure I understand correctly: you would like to make changes to {order}, is that right?",
            "So if I understand you correctly, you want the {item} from {order} handled today. Let me look into it.",
            "Got it - you'd like to return or exchange the {item}. I can help with that!",
        ),
        "airline": (
            "Just to confirm I have this right, you'd like to change reservation {reservation}, correct?",
            "So you want to modify your trip to {place} on {date}. I can definitely look into that for you.",
        ),
        "telecom": (
            "To summarize, the line {phone} is having trouble with mobile data and you'd like it fixed. Is that right?",
            "Let me make sure I understand: your phone on {phone} isn't connecting. Let me help you with that.",
        ),
    },
    "did_action": {
        "retail": (
            "I have gone ahead and processed the exchange on {order}. You should receive a confirmation email shortly.",
            "I've cancelled {order} for you and the refund has been issued to your original payment method.",
            "I went ahead and updated the shipping address on {order}.",
        ),
        "airline": (
            "I have gone ahead and cancelled reservation {reservation} for you.",
            "I've updated your booking {reservation}; the new flight details have been sent to your email.",
            "I've added the checked bags to reservation {reservation} and applied the charge to your card on file.",
            "ok i booked the flight to {place} on {date} for you, the confirmation number is {reservation}",
        ),
        "telecom": (
            "I have gone ahead and reset the data settings for {phone} on our end.",
            "I've re-enabled roaming on your line {phone} and refreshed your plan.",
            "I've applied a data refuel to {phone}, it should be active within a few minutes.",
        ),
    },
    "found_report": {
        "retail": (
            "Here's what I found:\n- Order: {order}\n- Item: {item}\n- Status: delivered\n- Customer: {name}",
            "I pulled up your account. Here are the details:\n* {order} - {item} - delivered",
        ),
        "airline": (
            "Here's what I found:\n- Reservation: {reservation}\n- Destination: {place}\n- Date: {date}\n"
            "- Cabin: economy",
            "I looked up {user_id} and I see reservation {reservation} to {place} on {date}.",
        ),
        "telecom": (
            "Here's what I found:\n- Line: {phone}\n- Status: active\n- Data usage: over the plan limit",
            "I checked the account and the line {phone} is active but data roaming is turned off.",
            "**Account summary**\n| Line | Status |\n|---|---|\n| {phone} | active |\nYour bill is paid in full.",
        ),
    },
    "verify": {
        "retail": (
            "To help you better, could you please provide your email address, or your name and zip code?",
            "Before I can look into {order}, I'll need to verify your identity. Can you give me the email on file?",
        ),
        "airline": (
            "To help you better, could you please provide your user ID so I can pull up the reservation?",
            "For security purposes, can you confirm the full name on reservation {reservation}?",
        ),
        "telecom": (
            "To help you better, could you please confirm the phone number associated with your account?",
            "Before we continue, can you verify the name of the account holder for {phone}?",
        ),
    },
    "apology": {
        "any": (
            "I'm so sorry for the inconvenience this has caused you.",
            "I sincerely apologize for the trouble, that's definitely not the experience we want for our customers.",
            "We apologize for any frustration this may have caused.",
        ),
    },
    "policy": {
        "retail": (
            "Per our policy, delivered items can only be exchanged once, and refunds go back to the original payment.",
            "Unfortunately our policy only allows pending orders to be cancelled.",
            "I'm afraid we are unable to offer a refund for {order}, as it falls outside our 30-day return window.",
        ),
        "airline": (
            "According to our policy, basic economy reservations cannot be modified once booked.",
            "As per our policy, cancellations more than 24 hours after booking are only refunded with insurance.",
        ),
        "telecom": (
            "Per our policy, data refuels are limited to 2 GB per line per billing cycle.",
            "Our policy requires the account to be in good standing before we can change {phone}'s plan.",
        ),
    },
    "options": {
        "retail": (
            "I can offer you two options: 1. a refund to your original payment method, or 2. a gift card credit. "
            "Which would you prefer?",
            "Would you prefer to exchange the {item} for a different variant, or return it for a refund?",
        ),
        "airline": (
            "I have a few alternatives for you:\n1. a later flight on {date}\n2. the earliest flight the next day\n"
            "Which option works best for you?",
            "Would you like me to upgrade the cabin or keep economy and just change the date?",
        ),
        "telecom": (
            "There are a couple of options here: I can add a data refuel, or we can move {phone} to a bigger plan. "
            "Which would you like?",
            "Would you prefer to troubleshoot the settings first, or should I look at upgrading the plan?",
        ),
    },
    "confirm_first": {
        "retail": ("Before I proceed, can you confirm you want me to go ahead with the changes to {order}? (yes/no)",),
        "airline": ("Before I make this change to {reservation}, please confirm with a yes to proceed.",),
        "telecom": ("Before I apply this to {phone}, could you please confirm (yes/no) that you'd like to proceed?",),
    },
    "escalate": {
        "any": (
            "I'll escalate this to a specialist who can assist you further.",
            "Let me transfer you to a human agent who will be able to help with this.",
            "This is beyond what I can do from here, so I'm transferring you to the right department now. Please hold.",
            "I'm going to escalate this to our support team; someone will follow up with you.",
        ),
    },
    "submitted": {
        "any": (
            "Your request has been submitted. Please allow 5-7 business days for it to be processed.",
            "All set! The request is in, and you should see the update within 3-5 business days.",
            "Your ticket has been created and our team will get back to you within 24-48 hours.",
            "done! you'll get a confirmation email shortly. refunds usually take 5-7 business days to show up",
        ),
    },
    "instructions": {
        "retail": ("Please check your email for the return label and drop the package off at any carrier location.",),
        "airline": ("Please check your email for the updated itinerary and arrive at the airport 2 hours early.",),
        "telecom": (
            "Please go to Settings > Mobile Network and toggle airplane mode off and on, then restart the phone.",
            "Can you please turn off Wi-Fi calling and reboot your device, then let me know the status bar?",
        ),
    },
    "ai_persona": {
        "any": (
            "As an AI assistant, I'm here to help you resolve this as quickly as possible.",
            "As your customer service assistant, I want to make sure everything is taken care of.",
            "I'm an AI assistant, so I can help with most account questions right here in this chat.",
            "As a virtual assistant I don't have feelings, but I'm glad I could help you today!",
        ),
    },
}


def skeleton(shape: str, domain: str, rng: random.Random) -> str:
    """One skeleton of ``shape`` for ``domain`` (the domain's own, else the shared ones)."""
    table = SHAPES[shape]
    return rng.choice(table.get(domain) or table["any"])


def slip(shape: str, values: Values, rng: random.Random, *, pad: bool = True) -> str:
    """The act with an opener or a closer now and then (``pad``), as a model in the assistant persona pads it."""
    parts = [skeleton(shape, values.domain, rng).format(**values.__dict__)]
    if not pad:
        return parts[0]
    if shape not in {"greeting", "pleasantry"} and rng.random() < 0.45:
        parts.insert(0, rng.choice(_OPENERS))
    if shape not in {"verify", "options", "confirm_first", "greeting", "pleasantry"} and rng.random() < 0.4:
        parts.append(rng.choice(_CLOSERS))
    return " ".join(parts)
