"""Grounding (issue 40 §1): a fact a customer states in any words is checked against what it could know."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.engine.review.facts import FactKind, stated_facts
from slime_tau_plugin.engine.review.grounding import Grounding
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag, Severity

INSTRUCTIONS = (
    "You received your order #W2378156 and wish to exchange the mechanical keyboard for one with clicky switches. "
    "You are Yusuf Rossi in zip code 19122. You do not remember your email address. Your phone number is "
    "555-123-2002, the order cost $1,204.50 and you flew on 2024-05-15 at 14:30 with two bags."
)


def episode(*turns: tuple[str, str], reward: float = 1.0, tool_outputs: tuple[str, ...] = ()) -> ReviewInput:
    """``turns``: (role, text) after the agent's system prompt."""
    messages = ({"role": "system", "content": "policy"}, *({"role": r, "content": t} for r, t in turns))
    return ReviewInput(INSTRUCTIONS, messages, reward, first_index=1, tool_outputs=tool_outputs)


def invented(text: str, *before: tuple[str, str], **kw) -> list[str]:
    turns = (*before, ("user", text), ("assistant", "Thanks, one moment."))
    return [f.detail for f in run_checks(episode(*turns, **kw)) if f.check is ReviewCheck.INVENTED_IDENTIFIER]


@pytest.mark.parametrize(
    "text",
    [
        "Sure, the card I used ends in 4417.",
        "You can reach me at (415) 867-5309.",
        "I think I paid around $89.99 for it.",
        "I placed it on March 3rd, 2024.",
        "Please deliver it at 3:30 pm.",
        "I ordered 3 keyboards.",
        "I bought seven of them.",
        "I think the total was about forty dollars.",
        "My name is actually Jordan Vale.",
        "my name is jordan vale",
        "I live at 42 Birch Lane, Springfield.",
        "My email is yusuf.r@gmail.com.",
        "I want the blue one in leather.",
        "I'd like the size XL please.",
        "My user id is yusuf_rossi_7781.",
        "The order number is W9912345.",
        "I'm flying from JFK to LAX.",
        "My reservation code is QX7T2B.",
        "It's the order I had shipped to Denver.",
        "I was born on 1988-07-14.",
    ],
)
def test_paraphrased_invented_facts_of_every_kind_are_flagged(text: str) -> None:
    assert invented(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Hi, I'm Yusuf Rossi from 19122 and I want to exchange the keyboard from order W2378156.",
        "My phone is (555) 123 2002.",
        "The one ending in 2002, it cost $1204.50 in total.",
        "I flew on May 15, 2024 at 2:30 PM.",
        "I flew on 05/15/2024.",
        "I have 2 bags.",
        "Yes, the clicky Mechanical Keyboard please.",
        "Yes, please go ahead.",
        "I'd like to cancel.",
        "Can you check my order?",
        "Thanks so much! Have a great day.",
        "I'm not sure, I don't remember my email.",
    ],
)
def test_facts_the_instructions_ground_in_any_written_form_are_not_flagged(text: str) -> None:
    assert invented(text) == [], text


def test_a_fact_grounded_only_in_the_agents_earlier_words_is_not_flagged() -> None:
    agent = ("assistant", "I see a Visa card ending in 4417 and order #W7777777 shipped to Denver, CO.")
    assert invented("Use the Visa ending in 4417 for #W7777777, the Denver one.", ("user", "Hi."), agent) == []
    assert invented("Use the Visa ending in 4417.", ("user", "Hi.")) != []  # without the agent's words it is new


def test_a_fact_grounded_only_in_the_customers_own_tool_results_is_not_flagged() -> None:
    shown = ("Status: SIM locked_pin, signal Excellent, data 80% used, APN internet.carrier.com",)
    assert invented("My phone says the SIM is locked_pin and I've used 80% of my data.", tool_outputs=shown) == []
    assert invented("My phone says the SIM is locked_pin and I've used 80% of my data.") != []


def test_the_agent_tool_call_carrying_a_paraphrased_fact_makes_it_critical() -> None:
    arguments = '{"email": "jordan.vale@example.org"}'
    call = f'<tool_call>\n{{"name": "find_user_id_by_email", "arguments": {arguments}}}\n</tool_call>'
    turns = (
        ("user", "My email is Jordan.Vale@example.org."),
        ("assistant", call),
        ("tool", "{}"),
        ("assistant", "Found you."),
    )
    (finding,) = run_checks(episode(*turns, reward=0.0))
    assert finding.check is ReviewCheck.INVENTED_IDENTIFIER and finding.tags == (ReviewTag.HALLUCINATION,)
    assert finding.severity is Severity.CRITICAL_HINDERED
    (unused,) = run_checks(episode(("user", "My email is Jordan.Vale@example.org."), ("assistant", "Thanks.")))
    assert unused.severity is Severity.MINOR


def test_spans_are_found_by_make_up_and_compared_in_normal_form() -> None:
    facts = stated_facts("Hi, my name is jordan vale. I bought three blue XL ones on May 5 at 10:30am for $12.")
    assert [(f.kind, f.text) for f in facts] == [
        (FactKind.NAME, "jordan vale"),
        (FactKind.NUMBER, "three"),
        (FactKind.VALUE, "blue"),
        (FactKind.CODE, "XL"),
        (FactKind.NUMBER, "May 5"),
        (FactKind.NUMBER, "10:30am"),
        (FactKind.NUMBER, "$12"),
    ]
    known = Grounding(["Jordan Vale bought 3 Blue xl items on 2024-05-05 at 10:30 for 12.00 dollars"])
    assert all(known.knows(f) for f in facts)
    assert not Grounding(["Jordan Vale bought 3 items on 2024-06-05 at 11:30"]).knows(facts[4])


def test_chat_template_text_is_not_a_fact() -> None:
    assert stated_facts("<|im_start|>assistant") == []


@pytest.mark.parametrize(
    "text",
    [
        "**Glad I could help! Let me know if you need anything.**",  # markdown before a sentence's first word
        "Representative: > Unfortunately that is all I can do.",  # a label and a quote mark
        "**As per the terms, it goes back to the card.**",
        "One moment please.",
        "Here are the options: 1. Exchange it 2. Return it",  # a numbered list's markers are no counts
        "here are the options: 1 exchange it for another size 2 return it",
        "ok so the line still has no data, sorry. one more question",  # the vocabulary file's comment words
    ],
)
def test_markdown_list_numbers_and_comment_words_are_not_facts(text: str) -> None:
    assert stated_facts(text) == [], [f.text for f in stated_facts(text)]


def test_numbers_that_are_not_a_list_stay_facts() -> None:
    """A count after a verb, a count without a "1" first, and a list item's own value are still stated facts."""
    assert [f.text for f in stated_facts("I want 1 lamp and 2 bottles")] == ["1", "lamp", "2"]
    assert [f.text for f in stated_facts("I have 2 bags and 3 boxes")] == ["2 bags", "3"]
    assert "W1234567" in [f.text for f in stated_facts("My orders: 1. #W1234567 and 2. the lamp")][0]
