"""The service's speech acts as a role-flipped LLM customer writes them, one writer per act, per τ domain.

Each writer returns one act (a sentence or a few) about the conversation's own values (:class:`Seen`), in the
voice of the service: offers to look something up, reports of what "I" did to the other side's records, identity
checks, the service's greeting and closing, apologies and policy in the company's name, transfers, options for the
other side to choose among, the yes/no before a write, and instructions for the other side's phone. The surface
forms vary on purpose (short and long, formal and casual); ``customer_faults_roleplay.py`` then places and styles
them. None is a customer's own act (asking the agent to act, its own apology, a policy it read, its own phone).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from slime_tau_plugin.tools.servers.roleplay_context import Seen

Writer = Callable[[Seen, random.Random], str]


def _one(rng: random.Random, values: tuple[str, ...], fallback: str) -> str:
    return rng.choice(values) if values else fallback


def _record(seen: Seen, rng: random.Random) -> str:
    """The record this conversation is about, as the service would name it."""
    if seen.domain == "airline":
        got = _one(rng, seen.reservations, "")
        return f"reservation {got}" if got else _one(rng, tuple(f"flight {f}" for f in seen.flights), "the booking")
    if seen.domain == "telecom":
        return f"the line ending in {seen.phones[0][-4:]}" if seen.phones else "your line"
    got = _one(rng, seen.orders, "")
    return f"order {got}" if got else "the order"


def _thing(seen: Seen, rng: random.Random) -> str:
    if seen.domain == "retail":
        return _one(rng, seen.items, "item")
    if seen.domain == "airline":
        return _one(rng, tuple(f"flight {f}" for f in seen.flights), "flight")
    return _one(rng, seen.settings, "mobile data")


def offer_lookup(seen: Seen, rng: random.Random) -> str:
    rec = _record(seen, rng)
    return rng.choice(
        (
            f"Let me pull up {rec} for you.",
            f"One moment while I look into {rec}.",
            f"Sure, I can check on {rec} — give me just a second.",
            f"I'd be happy to look that up. Let me check the details of {rec}.",
            f"let me take a look at {rec} real quick",
            f"I'll check what we have on file for {rec} and get right back to you.",
        )
    )


def report_action(seen: Seen, rng: random.Random) -> str:
    rec, thing = _record(seen, rng), _thing(seen, rng)
    per_domain = {
        "retail": (
            f"I've gone ahead and cancelled {rec}; the refund will go back to the original payment method.",
            f"I have processed the exchange of the {thing} on {rec}.",
            f"Done — I updated the shipping address on {rec}.",
            f"The return for the {thing} has been submitted on my end, you'll get an email with the label.",
        ),
        "airline": (
            f"I've updated {rec} for you, the change is confirmed.",
            f"I have cancelled {rec} and issued the refund to the original form of payment.",
            f"I've added a checked bag to {rec}.",
            f"Your {thing} has been rebooked, you're all set.",
        ),
        "telecom": (
            f"I've added a data refuel to {rec}.",
            f"I reset the network settings for {rec} on our side.",
            f"I just resumed service on {rec}, it should be active within a few minutes.",
            f"I've turned on roaming for {rec} in our system.",
        ),
    }
    return rng.choice(per_domain[seen.domain])


def verify_identity(seen: Seen, rng: random.Random) -> str:
    per_domain = {
        "retail": (
            "Before I can help, could you please verify your identity with your email address?",
            "Can you confirm your first and last name and your zip code so I can locate your account?",
            "To get started I'll need to authenticate you. What's the email on the account?",
        ),
        "airline": (
            "Could you please provide your user ID so I can access your profile?",
            "May I have your user id and the reservation number, please?",
            "First I need to verify who I'm speaking with — what's your user ID?",
        ),
        "telecom": (
            "Can you please give me the phone number on the account so I can verify it's you?",
            "For security, could you confirm your full name and the number of the line?",
            "could you verify your account for me with the phone number or customer id",
        ),
    }
    return rng.choice(per_domain[seen.domain])


def greet(seen: Seen, rng: random.Random) -> str:
    company = {"retail": "our store", "airline": "the airline", "telecom": "customer support"}[seen.domain]
    return rng.choice(
        (
            "Hi there! How can I help you today?",
            f"Hello, thank you for contacting {company}. What can I do for you?",
            "Welcome! I'm here to help — what brings you in today?",
            f"Thanks for reaching out to {company}! How may I assist you?",
            "hi! what can i help you with today",
        )
    )


def close(seen: Seen, rng: random.Random) -> str:
    return rng.choice(
        (
            "Is there anything else I can help you with today?",
            "Thank you for contacting us, and have a wonderful day!",
            "Glad I could help! Let me know if there's anything else you need.",
            "You're all set. Thanks for choosing us!",
            "anything else i can do for you today?",
        )
    )


def apologize(seen: Seen, rng: random.Random) -> str:
    rec = _record(seen, rng)
    return rng.choice(
        (
            f"I'm so sorry for the inconvenience with {rec}, we apologize for the trouble this has caused.",
            "On behalf of the company, I apologize for the delay.",
            f"We're sorry about the issue with {rec} — that's not the experience we want you to have.",
            "I sincerely apologize for any frustration, I understand how annoying this must be for you.",
        )
    )


def transfer(seen: Seen, rng: random.Random) -> str:
    return rng.choice(
        (
            "I'm going to transfer you to a human agent who can help you further. Please hold.",
            "Let me connect you with a specialist, one moment please.",
            "I'll escalate this to our supervisor team; they'll reach out to you shortly.",
            "This is outside what I can do, so I'm transferring you to the right department now.",
        )
    )


def policy(seen: Seen, rng: random.Random) -> str:
    per_domain = {
        "retail": (
            "Per our policy, an order can only be exchanged or returned once it has been delivered.",
            "Unfortunately our policy only allows us to cancel orders that are still pending.",
            "As per our terms, refunds go either to the original payment method or to a gift card.",
        ),
        "airline": (
            "Per our policy, basic economy flights cannot be modified once booked.",
            "Our policy only allows cancellations for members or with travel insurance.",
            "I'm afraid we can't change the origin or destination of a reservation under our rules.",
        ),
        "telecom": (
            "According to our policy, we can't resume a suspended line while there is an overdue bill.",
            "Per our policy, we can only refuel data on an active line.",
            "Our rules don't allow us to change the plan of a line in the middle of a billing cycle.",
        ),
    }
    return rng.choice(per_domain[seen.domain])


def options(seen: Seen, rng: random.Random) -> str:
    """The service's menu: the other side is asked to choose (numbered, inline, or about its payment)."""
    per_domain = {
        "retail": (
            "Here are your options:\n1. Exchange it for a different size or color\n2. Return it for a refund\n"
            "Which would you prefer?",
            "Would you like the refund to go to your gift card or back to the original credit card?",
            f"Do you want me to exchange the {_thing(seen, rng)} or return it?",
        ),
        "airline": (
            "I can offer you:\n1. The earliest nonstop option\n2. A cheaper one-stop option\n"
            "Which one works better for you?",
            "Would you like to pay for the change with your credit card or with a travel certificate?",
            "Which cabin would you like: basic economy, economy or business?",
        ),
        "telecom": (
            "We have two options:\n1. Add a data refuel\n2. Upgrade the plan\nWhich would you like?",
            "Would you like to pay the overdue bill now, or set up a payment later?",
            f"Do you want me to walk you through {_thing(seen, rng)} first or check the SIM card?",
        ),
    }
    return rng.choice(per_domain[seen.domain])


def confirm_write(seen: Seen, rng: random.Random) -> str:
    rec = _record(seen, rng)
    return rng.choice(
        (
            f"Just to confirm, you want me to proceed with the changes to {rec}? Please reply yes or no.",
            f"Before I go ahead: I will update {rec} as discussed. Shall I proceed?",
            f"Can you confirm (yes/no) that you'd like me to make this change to {rec}?",
            "please confirm with a yes and I'll submit it",
        )
    )


def device(seen: Seen, rng: random.Random) -> str:
    """Instructions for the other side's phone: the agent's part in τ² telecom, in the customer's mouth."""
    setting = _one(rng, seen.settings, "airplane mode")
    return rng.choice(
        (
            f"Please go to Settings and toggle {setting}, then tell me what your status bar shows.",
            "Can you restart your phone and let me know if the signal comes back?",
            "Try removing the SIM card and putting it back in, then check your bars.",
            f"ok so first open settings, turn {setting} off and back on and tell me what you see",
            "Next, please run a speed test on your device and read me the result.",
        )
    )


WRITERS: dict[str, Writer] = {
    "offer_lookup": offer_lookup,
    "report_action": report_action,
    "verify_identity": verify_identity,
    "greet": greet,
    "close": close,
    "apologize": apologize,
    "transfer": transfer,
    "policy": policy,
    "options": options,
    "confirm_write": confirm_write,
    "device": device,
}
"""Every act; ``device`` applies to telecom only (elsewhere the service does not drive a phone)."""
