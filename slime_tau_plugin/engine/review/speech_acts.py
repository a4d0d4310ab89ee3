"""The agent's speech acts in a customer message, read off a sentence's make-up rather than one phrase list.

A customer asks, answers, confirms and stops. The service side offers to look things up or act *for the other
side*, reports what it did *to the other side's* records, asks the other side to prove who they are, and greets or
closes *as the service*. Each sentence is reduced to a few features and scored; :func:`agent_acts` names the acts
found. The features are about who acts on whose things, not wording:

- ``actor``: the subject nearest before a service verb is first person (``I``, ``we``, ``let me``, ``allow me``),
  not ``you`` ("can you check my order?" and "I'd like you to cancel it" have the customer asking);
- ``service``: the verb is one of the service's (look up, check, pull up, process, cancel, refund, update, book,
  verify, help, assist, ... in any inflection);
- ``theirs``: its object belongs to the other side (``your`` + a noun that is not the company's own: "your order",
  not "your website"; "for you"; a bare ``you`` only after help, assist, serve, transfer, refund, credit);
- ``offer``: a modal of offering before it (``let me``, ``I can``, ``I'll``, ``I'd be happy to``, ``shall I``);
- ``done``: a perfect or past form (``I've``, ``I have``, ``I just``, ``-ed``), one under way ("I'm checking",
  "while I transfer you"), or "your X has been <done>" (not "to be <done>": the
  instructions a stand-in reads out say "you want the refund to be credited to your card");
- ``identity``: a request (``could you``, ``please``, ``may I``, ``what is``, ``I need``, a question) for ``your`` +
  an identity noun (email, name, zip, user id, phone, date of birth, ...);
- ``service voice``: thanking the other side for contacting, calling or reaching out, welcoming them *to*
  somewhere, "you've reached", "valued customer", asking whether there is "anything else" (not "anything else
  you need from me"), a role label, a tool call;
- ``security``: "for security", "verify your identity", "authenticate you" in a request.

An act is ``offer`` = actor + offer + service + theirs; ``report`` = actor + done + service + theirs, or the
passive "your X has been <done>" / "you are being <done>"; ``verify`` = identity or security; ``greet`` =
service voice or an offer whose verb is help, assist or serve. A telecom customer's reports of its own actions
("I've restarted my phone") have no ``theirs``.

Cost: tens of µs for a short message (one tokenising regex, set and dict look-ups; benchmarks/user_review.md).
Imports nothing from the package.
"""

from __future__ import annotations

import re

__all__ = ["agent_acts"]

_SENTENCES = re.compile(r"[^.!?\n]+[.!?]*")
_TOKENS = re.compile(r"[a-z]+(?:'[a-z]+)?|[?]")
_FIRST = {"i", "we", "i'm", "i've", "i'll", "i'd", "we're", "we've", "we'll", "we'd", "me"}
_SECOND = {"you", "you're", "you've", "you'll", "you'd"}
_OTHER_SUBJECTS = {"he", "she", "they", "it", "someone", "somebody", "agent", "representative"} | _SECOND
_VERBS = (
    "look check pull find locate search review process cancel refund modify update change book rebook exchange "
    "return issue apply submit place initiate arrange escalate resolve fix handle transfer reset verify confirm "
    "authenticate help assist serve add remove credit waive reactivate activate enable disable upgrade downgrade "
    "suspend resume reship replace reissue refill refuel schedule reschedule create open"
).split()
_OFFER = {"can", "could", "will", "'ll", "i'll", "we'll", "shall", "would", "happy", "glad", "let", "allow", "gladly"}
_OFFER |= {"here"}  # "I'm here to help you"
_DONE = {"i've", "we've", "have", "has", "just", "already", "successfully", "been"}
_COMPANY_NOUNS = {
    "website",
    "site",
    "store",
    "shop",
    "policy",
    "policies",
    "system",
    "company",
    "team",
    "service",
    "services",
    "app",
    "end",
    "side",
    "help",
    "support",
    "records",
    "department",
    "manager",
    "supervisor",
    "colleague",
    "name",
    "time",
    "patience",
    "assistance",
    "airline",
    "offer",
    "terms",
    "agents",
    "staff",
    "hotline",
    "website's",
}
_IDENTITY = {
    "email",
    "e-mail",
    "name",
    "zip",
    "zipcode",
    "postal",
    "id",
    "identity",
    "phone",
    "number",
    "birth",
    "dob",
    "birthday",
    "address",
    "account",
    "pin",
    "password",
    "passcode",
    "membership",
    "passport",
    "username",
    "user",
}
_ASK = re.compile(r"\b(?:(?:could|can|would|will) you|please|may i|can i|what is|what's|(?:i|we)(?:'ll| will)? need)\b")
_SECURITY = re.compile(r"\b(?:for (?:security|verification)|verify (?:the|your) identity|authenticate you)\b")
_HELP_VERBS = {"help", "assist", "serve"}
_YOU_VERBS = _HELP_VERBS | {"transfer", "refund", "credit"}
"""Verbs whose bare ``you`` object is the other side ("I'll transfer you"); "I can confirm you have it" is not."""
_LABEL = re.compile(r"^\s*\**\s*(?:agent|assistant|representative|customer (?:service|support))\s*\**\s*:", re.I)
_VOICE = re.compile(
    r"\bthank(?:s| you) for (?:contacting|calling|reaching out|choosing|shopping with|being a valued)\b"
    r"|\bwelcome to\b|\byou(?:'ve| have) reached\b|\bvalued customer\b"
    r"|\bis there anything else(?! you need| from me| i (?:should|need|can give))\b[^.!]*\?"
    r"|<tool_call>|\"arguments\"\s*:\s*\{",
    re.I,
)


def _forms(verb: str) -> list[str]:
    """Every inflection of ``verb`` the classifier reads: check/checks/checked/checking, cancel(l)ed, placing."""
    stem = verb[:-1] if verb.endswith("e") else verb
    doubled = verb + verb[-1] if verb[-1] in "lprt" and verb[-2] in "aeiou" else verb
    return [verb, verb + "s", verb + "es", verb + "d", verb + "ed", stem + "ing", doubled + "ed", doubled + "ing"]


_FORMS = {form: verb for verb in _VERBS for form in _forms(verb)} | {"found": "find"}


def _verb(token: str) -> str | None:
    """The service verb ``token`` is a form of (``cancelled`` -> ``cancel``), or None: one dict look-up."""
    return _FORMS.get(token)


def _sentence_acts(tokens: list[str]) -> set[str]:
    acts: set[str] = set()
    for k, token in enumerate(tokens):
        verb = _verb(token)
        if verb is None:
            continue
        before, after = tokens[max(0, k - 6) : k], tokens[k + 1 : k + 7]
        subject = next((t for t in reversed(before) if t in _FIRST or t in _OTHER_SUBJECTS), None)
        actor = subject in _FIRST or (subject is None and any(t in {"happy", "glad"} for t in before))
        theirs = _theirs(after, verb in _YOU_VERBS)
        if actor and theirs and any(t in _OFFER for t in before) and not _asks_other(before):
            acts.add("greet" if verb in _HELP_VERBS else "offer")
        if actor and theirs and (token.endswith("ed") or token == "found" or any(t in _DONE for t in before)):
            if not any(t in {"can", "could", "will", "'ll", "i'll", "let"} for t in before):
                acts.add("report")
        under_way = token.endswith("ing") and before[-1:] in (["i'm"], ["am"], ["we're"])
        if actor and theirs and (under_way or "while" in before):
            acts.add("report")  # an action under way: "I'm pulling up your order", "while I transfer you"
        if token.endswith("ed") and before[-1:] in (["been"], ["now"], ["is"], ["are"]) and _yours(tokens):
            acts.add("report")  # "your order has been cancelled", "the refund has been issued to your card"
        if token.endswith("ed") and before[-3:] in (["you", "are", "being"], ["you", "have", "been"]):
            acts.add("report")  # "you are being transferred"
    for k, token in enumerate(tokens):
        if token == "your" and k + 1 < len(tokens) and _identity(tokens[k + 1 : k + 4]):
            if _ASK.search(" ".join(tokens[max(0, k - 6) : k])) or tokens[-1] == "?":
                acts.add("verify")
    if _SECURITY.search(" ".join(tokens)) and (_ASK.search(" ".join(tokens)) or tokens[-1] == "?"):
        acts.add("verify")  # "for security, could you confirm the email on the account?"
    return acts


def _yours(tokens: list[str]) -> bool:
    """The sentence is about the other side's things and none of the speaker's own."""
    return "your" in tokens and "my" not in tokens and "mine" not in tokens


def _theirs(after: list[str], bare_you: bool) -> bool:
    """The verb's object is the other side's: ``your <noun>`` (not the company's own), ``you``, ``for you``."""
    for k, token in enumerate(after[:5]):
        if token == "your":
            noun = next((t for t in after[k + 1 : k + 4] if t not in {"current", "recent", "new", "old"}), "")
            return noun not in _COMPANY_NOUNS
        if token == "you" and ((k == 0 and bare_you) or (k > 0 and after[k - 1] == "for")):
            return True
    return False


def _asks_other(before: list[str]) -> bool:
    """A question to the other side ("can you", "would you like me to") is not an offer by the speaker, except
    "would you like me to ...", which is."""
    text = " ".join(before)
    return bool(re.search(r"\b(?:can|could|would|will) you\b", text)) and "like me" not in text


def _identity(words: list[str]) -> bool:
    return any(w in _IDENTITY for w in words[:2]) or "birth" in words[:3]


def agent_acts(text: str) -> list[str]:
    """The agent's speech acts in ``text`` (``offer``, ``report``, ``verify``, ``greet``), in the order found."""
    found: list[str] = []
    if _LABEL.search(text) or _VOICE.search(text):
        found.append("greet")
    for sentence in _SENTENCES.findall(text.lower().replace("’", "'")):
        for act in sorted(_sentence_acts(_TOKENS.findall(sentence))):
            if act not in found:
                found.append(act)
    return found
