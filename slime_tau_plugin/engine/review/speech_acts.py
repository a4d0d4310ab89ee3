"""The agent's speech acts in a customer message, read off a sentence's make-up rather than one phrase list.

A customer asks, answers, confirms and stops. The service side offers to look things up or act *for the other
side*, reports what it did *to the other side's* records, asks the other side to prove who they are, and greets or
closes *as the service*. Each sentence is reduced to a few features; :func:`agent_acts` names the acts found. The
features are about who acts on whose things, not wording (the words are in ``speech_words.py``):

- ``actor``: the subject nearest before a service verb is first person (``I``, ``we``, ``let me``, ``let's``,
  ``allow me``; ``ive``/``im``/``ill`` unpunctuated), not ``you`` ("can you check my order?", "I'd like you to
  cancel it" ask); a verb joined by "and" keeps its subject ("I'll initiate the return and email you the label");
- ``service``: the verb is one of the service's (look up, check, pull up, process, cancel, refund, update, issue,
  verify, help, ... in any inflection, "modified" and "sent" included; "make sure", "take care of" and "reach out"
  read as one verb); after an article it is a thing, not an act ("a refund", "the issue");
- ``theirs``: its object is the other side's: ``your`` + a noun that is not the company's own ("your order", not
  "your website"), "for you", a bare ``you`` after help, transfer, refund, upgrade, rebook ..., "send/email you" a
  label or a confirmation; or a service **record** named by a determiner ("that order", "the status of the booking")
  when the verb is one only the service performs (process, issue, waive, note, escalate, look up/into, pull up: then
  "it" and "this" count too) or a cue says it is done *for the other side*; never the speaker's own (``my``), the
  record's identifier ("the order number"), or what a customer does to its own records (place, book, return);
- ``inspects``: the speaker offers to read a service record (check, look at, review, search, pull up) named by a
  determiner or by its id after a particle ("let me check the details of the order", "I can check on order
  #W7209932"), with none of its own things, no device, not "look for" and not the options;
- ``place``: where only the service works: "our system/records", and, when the clause names none of the speaker's
  own things and no device, "in the system", "on my end", "on file", "on/from the account";
- ``for them``: "you'll receive", "should show up", "as requested", "if you'd like", "for you", "all set", "just
  now", "right away", "shortly", "went ahead and", "one moment", "allow me" (again only without ``my`` or a device);
- ``offer``: a modal of offering before it (``let me``, ``I can``, ``I'll``, ``I'm going to``, ``shall I``, ``would
  you like me to``, ``give me a second to``; a refusal, ``I'm unable to``, is the service's too), unless the
  speaker asks about its own doing ("can I apply it?", "I wonder if I can ...", "is there any way we can ...?");
- ``done``: a perfect or past form (``I've``, ``I just``, ``I was able to``, ``-ed``), one under way ("I'm
  currently checking", "while I transfer you"), or a passive on the other side's record ("your X has been <done>",
  "done, the order has been modified as requested"; not "to be <done>" nor "was <done>": the instructions a
  stand-in reads out say "your flight was canceled");
- ``identity``: a request (``could you``, ``please``, ``may I``, ``what is``, ``I need``, a question) for ``your`` +
  an identity noun, or one gated on the service's work ("could you *first* confirm the last four digits", "*before
  we continue*", "*to locate* ...") with none of the speaker's own things; "for security" in a request;
- ``reading``: the service reading the other side's records to them ("I see here that your order ...", "it looks
  like your reservation ...");
- ``presents``: the service presenting its work whatever the verb: an act "in our system", "here's what I found",
  "good news: your ...", a summary of the request after an opener ("to recap, you'd like to cancel ...");
- ``service voice``: thanking the other side for contacting, calling, getting in touch or choosing, "welcome to",
  "you've reached", "valued customer", "glad I could help", "anything else I can do", "how can I help", "my
  pleasure", a role label, a tool call.

An act is ``offer`` = actor + offer + service + theirs; ``report`` = actor + done + service + theirs, the passive,
a promise of what the other side will receive ("you should see the refund in a few days") or a reading; ``verify``
= identity or security; ``greet`` = service voice or an offer whose verb is help, assist or serve. A telecom
customer's reports of its own actions ("I've restarted my phone", "I turned airplane mode off on my end") have no
``theirs``: a device word turns the weak cues off.

Cost: about a hundred µs for a customer message (one tokenising regex, set and dict look-ups, cue regexes behind a
substring test; benchmarks/user_review.md). Imports only ``speech_words``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from slime_tau_plugin.engine.review import speech_words as w
from slime_tau_plugin.engine.review.speech_asks import asks_and_stances

__all__ = ["agent_acts"]


MY_SIDE = re.compile(r"\b(?:on|from) my (?:end|side)\b")


def _verb(token: str) -> str | None:
    """The service verb ``token`` is a form of (``cancelled`` -> ``cancel``), or None: one dict look-up."""
    return w.FORMS.get(token)


def _cues(tokens: list[str], done: bool) -> tuple[bool, bool]:
    """(the sentence says where only the service acts, it says the act is done for the other side). "On my end"
    is the service's only away from a device and the customer's own things, and only for an act offered or under
    way (``done``: "I've confirmed the address on my end" is a customer's check of its own details)."""
    text = " ".join(tokens)
    text = MY_SIDE.sub(" ", text) if done else text
    rest = w.MY_END.sub(" ", text).replace("data plan", "plan").split()
    device = bool(w.DEVICE.intersection(rest))
    mine = bool({"my", "mine", "myself"}.intersection(rest)) or device
    place = not device and (bool(w.SERVICE_PLACE.search(text)) or (not mine and bool(w.MY_END.search(text))))
    return place, place or (not mine and bool(w.TO_THEM.search(text)))


@dataclass(frozen=True, slots=True)
class _Verb:
    """One service verb in a sentence, with the features the acts are read from."""

    k: int
    token: str
    verb: str
    before: list[str]
    after: list[str]
    at: int | None
    """Where its subject is (None: no subject in reach)."""
    actor: bool
    """The subject is the speaker."""
    theirs: bool
    """It acts on the other side's things."""
    offer: bool
    """A modal of offering comes before it, and the speaker does not ask about its own doing."""
    for_them: bool
    """A cue says it is done for the other side."""
    place: bool
    """The clause names a place only the service works in."""
    service_only: bool
    """Only the service performs it."""


def _sentence_acts(tokens: list[str]) -> set[str]:
    """The acts of one tokenised sentence: each service verb's features, then the rules of the module docstring."""
    acts: set[str] = set()
    last: int | None = None
    text = " ".join(tokens)
    ours = bool(w.SERVICE_PLACE.search(text))
    cued = ours or bool(w.TO_THEM.search(text) or w.MY_END.search(text))  # else no clause needs _cues
    ours = ours and not w.DEVICE.intersection(tokens)
    for k, token in enumerate(tokens):
        verb = _verb(token)
        wish = verb == "look" and tokens[k + 1 : k + 2] in (["to"], ["forward"])  # "I'm looking to cancel"
        if verb is None or wish or _noun(tokens, k):
            continue  # not an act, or a thing ("a refund", "the issue", "a full refund")
        v = _features(tokens, k, verb, last, cued)
        last = v.at if v.at is not None else last
        acts |= _acts(tokens, v, ours)
    if _promised(tokens):
        acts.add("report")  # "the cancellation went through, you should see the refund in a few days"
    return acts | _verify(tokens) | _presents(tokens, text)


def _restates(tokens: list[str]) -> bool:
    """A summary of the other side's wish to a service act ("so, just to confirm, you'd like to cancel the order"):
    the service summing up the request; a customer's "you'd like my zip?" is a question, "if you'd like" a
    condition, "I know you want to verify ..." the speaker's own."""
    for k in range(len(tokens) - 3):
        if tokens[k : k + 3] == ["you'd", "like", "to"]:
            at = k + 3
        elif tokens[k] == "you're" and tokens[k + 1].endswith("ing"):  # "to recap: you're returning the keyboard"
            at, tokens = k + 1, [*tokens[: k + 1], w.FORMS.get(tokens[k + 1], ""), *tokens[k + 2 :]]
        elif tokens[k : k + 4] == ["you", "would", "like", "to"]:
            at = k + 4
        else:
            continue
        if tokens[k - 1 : k] in (["if"], ["do"], ["when"], ["what"]) or w.SPEAKER.intersection(tokens[:k]):
            return False
        if not w.SUMMING_UP.intersection(tokens[:k]):
            return False  # a pasted instruction ("... you'd like to exchange ..."), not a summary
        return at < len(tokens) and w.FORMS.get(tokens[at]) in w.RESTATED
    return False


def _presents(tokens: list[str], text: str) -> set[str]:
    """The service presenting its own work to the other side, whatever the verb: an act "in our system" by the
    speaker ("I've turned on roaming in our system"), "here's what I found" over a list, "good news: your ...";
    none with the speaker's own things (``my``: "here's what I found in my email") or as a question."""
    if {"my", "mine", "myself"}.intersection(tokens):
        return set()
    if _restates(tokens):
        return {"report"}  # "to recap: you'd like to cancel reservation ABC123, correct?"
    if "?" in tokens:
        return set()
    if w.SUMMARY.search(text):
        return {"report"}  # "here's a summary of what we discussed"
    if not {"our", "here", "here's", "news"}.intersection(tokens):
        return set()
    if w.SERVICE_PLACE.search(text) and w.FIRST.intersection(tokens):
        return {"report" if w.PERFECT.intersection(tokens) else "offer"}
    if w.FOUND.search(text) or (tokens[:2] == ["good", "news"] and "your" in tokens):
        return {"report"}
    return set()


def _noun(tokens: list[str], k: int) -> bool:
    """The verb-looking word at ``k`` follows an article, maybe past one adjective: "a refund", "a full refund"."""
    if k > 0 and tokens[k - 1] in w.ARTICLES:
        return True
    return k > 1 and tokens[k - 2] in w.ARTICLES and _verb(tokens[k - 1]) is None and tokens[k - 1] not in w.FIRST


def _features(tokens: list[str], k: int, verb: str, last: int | None, cued: bool) -> _Verb:
    """The features of the service verb at ``k``; ``last``: the subject of the verb before it in the sentence (a
    verb joined by "and" keeps it); ``cued``: the sentence has a place or for-them cue at all."""
    before, after = tokens[max(0, k - 6) : k], tokens[k + 1 : k + 11]
    subjects = (j for j in range(k - 1, max(-1, k - 7), -1) if tokens[j] in w.FIRST or tokens[j] in w.OTHER_SUBJECTS)
    at = next(subjects, None)
    if at is None and last is not None and "and" in before[-2:]:
        at, before = last, tokens[max(0, last - 2) : last + 1] + before[-2:]  # "I'll initiate it and email you"
    subject = tokens[at] if at is not None else None
    actor = subject in w.FIRST or (subject is None and any(t in {"happy", "glad"} for t in before))
    clause = tokens[at if at is not None else max(0, k - 5) : k + 11]  # the actor's clause
    done = tokens[k].endswith("ed") or tokens[k] in w.IRREGULAR
    place, for_them = _cues(clause, done) if cued else (False, False)
    split = after[:1] in (["it"], ["that"], ["this"], ["them"]) and after[1:2] == ["up"]  # "look that up"
    looks = verb in {"look", "pull"} and (after[:1] in (["up"], ["into"]) or split)
    particle = after[:1] in (["up"], ["into"], ["for"], ["at"], ["through"], ["on"])
    obj = after[1:] if particle else after
    named = particle and obj[:1] != [] and obj[0] in w.RECORDS and obj[1:2] != [] and obj[1] not in w.OWN_IDS
    record = (named or _record(obj, verb in w.SERVICE_ONLY)) and verb not in w.CUSTOMER_VERBS  # "check on order W1"
    service_only = verb in w.SERVICE_ONLY or looks  # a pronoun is a record only to the first ("I'll look into it")
    sends = verb in w.SEND_VERBS and after[:1] == ["you"] and bool(w.ARTIFACTS.intersection(after[1:5]))
    helps = verb in w.HELP_VERBS and after[:2] in (["with", "that"], ["with", "this"], ["with", "it"])
    helps = sends or (helps and before[-1:] in (["can"], ["to"], ["me"], ["will"], ["i'll"], ["we'll"], ["could"]))
    helps = helps or bool(w.EVALUATIONS.intersection(after[:3]))  # "let me verify the eligibility of ..."
    offer = any(t in w.OFFER for t in before) or "me to" in " ".join(before)  # "would you like me to"
    offer = offer and not _asks_self(tokens, at)
    inspects = record and offer and verb in w.INSPECT and after[:1] != ["for"]  # "I'll look for those details"
    mine = {"my", "mine", "myself"}.intersection(tokens)
    inspects = inspects and not mine and "options" not in obj[:4]  # options are the customer's to weigh
    inspects = inspects and not w.DEVICE.intersection(tokens)  # "let me check the details of the order"
    theirs = helps or _theirs(after, verb in w.YOU_VERBS) or place or (record and (for_them or service_only))
    theirs = theirs or inspects
    if verb in w.FOR_YOU_ONLY:
        theirs = "for you" in " ".join(after)
    return _Verb(k, tokens[k], verb, before, after, at, actor, theirs, offer, for_them, place, service_only)


def _acts(tokens: list[str], v: _Verb, ours: bool) -> set[str]:
    """The acts one service verb performs; ``ours``: the sentence names a place only the service works in."""
    acts: set[str] = set()
    token, before, after = v.token, v.before, v.after
    if v.actor and v.theirs and v.offer and not _asks_other(before):
        acts.add("greet" if v.verb in w.HELP_VERBS else "offer")
    done = token.endswith("ed") or token in w.IRREGULAR
    if done and (ours or (before[-1:] == ["been"] and v.place)):  # "that's been taken care of on our side"
        acts.add("report")  # "it's been updated in our system"
    wanted = before[-1:] in (["be"], ["get"]) or (before[-1:] == ["to"] and before[-2:-1] != ["able"])
    # a wish, not a deed: "I want it to be processed", "I'd like to get refunded"; "I was able to" did it
    if v.actor and v.theirs and not wanted and (done or any(t in w.DONE for t in before)):
        if not any(t in {"can", "could", "will", "'ll", "i'll", "let"} for t in before):
            acts.add("report")
    under_way = token.endswith("ing") and bool({"i'm", "am", "we're", "im"}.intersection(before[-2:]))
    opener = token.endswith("ing") and v.at is None and set(before) <= w.OPENERS  # "one sec, pulling that up"
    actor = v.actor or opener  # a sentence that starts at its verb has the speaker act
    if actor and v.theirs and (under_way or opener or "while" in before):
        acts.add("report")  # an action under way: "I'm pulling up your order", "while I transfer you"
    if actor and token.endswith(("ed", "en")) and _causes(before, v.for_them or v.service_only):
        acts.add("offer")  # "let's get your order sorted", "I'll get that exchange processed right away"
    participle = done or token.endswith("en") or v.verb == "complete"
    moved = before[-1:] == ["was"] and "your" in after[:4] and "your" not in before  # "reversed to your card"
    if participle and ({"been", "now", "is", "are"}.intersection(before[-2:]) or moved):
        now = "now" in before[-2:] or before[-2:] == ["has", "been"]
        settled = v.verb in w.SETTLED and now and _impersonal(tokens)
        yours = _passive_yours(tokens, v.k) and _yours(tokens)
        if yours or ((v.for_them or settled) and _record(before[-5:], False)):
            acts.add("report")  # "your order has been cancelled", "done, the order has been modified"
    if token.endswith("ed") and before[-3:] in (["you", "are", "being"], ["you", "have", "been"]):
        acts.add("report")  # "you are being transferred"
    return acts


def _impersonal(tokens: list[str]) -> bool:
    """A plain statement with no speaker of its own in it ("a full refund has been issued", "the exchange is now
    complete"): not a question, a quote or the speaker's own experience ("the refund has been issued but I ...")."""
    return not {"?", "i", "my", "me", "i'm", "i've", "said", "told", "says", "if", "whether"}.intersection(tokens)


def _causes(before: list[str], cued: bool) -> bool:
    """ "get/have <the other side's thing> <done>": ``your X``, or a named record with a cue."""
    at = next((j for j in range(len(before) - 2, max(-1, len(before) - 5), -1) if before[j] in {"get", "have"}), None)
    if at is None:
        return False
    thing = before[at + 1 :]
    return (thing[:1] == ["your"] and "my" not in thing) or (cued and _record(thing + ["."], False))


def _promised(tokens: list[str]) -> bool:
    """The speaker tells the other side what it will receive from the service: "you should see the refund"."""
    for k in range(len(tokens) - 2):
        if tokens[k] in {"you'll", "you"} and tokens[k + 1] in {"should", "will", "'ll", "get", "receive", "see"}:
            rest = tokens[k + 1 : k + 6]
            if {"get", "receive", "see"}.intersection(rest[:3]) and w.RECEIPTS.intersection(rest):
                told = {"not", "never", "won't", "says", "said", "told", "if", "my", "?"}  # a denial, a quote, a doubt
                return not told.intersection(tokens) and not w.DEVICE.intersection(tokens)
    return False


def _passive_yours(tokens: list[str], k: int) -> bool:
    """The passive at ``k`` is about the other side's thing: ``your X`` is its subject ("your flight from JFK has
    been booked", no clause between) or its destination ("sent to your email")."""
    if "?" in tokens:
        return False  # a question about it is the customer's ("has my order been cancelled?")
    ahead = tokens[k + 1 : k + 5]
    if "your" in ahead:
        return ahead[ahead.index("your") + 1 : ahead.index("your") + 2] not in (["side"], ["end"], ["website"])
    span = tokens[max(0, k - 10) : k]
    if "your" not in span:
        return False
    at = len(span) - 1 - span[::-1].index("your")
    return not w.SUBORDINATORS.intersection(span[max(0, at - 2) :])  # "until your changes have been made": a condition


def _verify(tokens: list[str]) -> set[str]:
    """A request for the other side's proof of identity: ``your`` + an identity noun, or a gated request for one
    ("could you first confirm the last four digits of the card on file?"); "for security" in a request."""
    if not w.PROOF_WORDS.intersection(tokens):
        return set()  # the common case: nothing about identity, one set look-up
    text = " ".join(tokens)
    ask = bool(w.ASK.search(text)) or tokens[-1:] == ["?"]
    for k, token in enumerate(tokens):
        if token == "your" and k + 1 < len(tokens) and _identity(tokens[k + 1 : k + 4]):
            if w.ASK.search(" ".join(tokens[max(0, k - 6) : k])) or tokens[-1] == "?":
                return {"verify"}
    if ask and w.SECURITY.search(text):
        return {"verify"}  # "for security, could you confirm the email on the account?"
    own = {"my", "mine", "me"}.intersection(w.TOLD_ME.sub(" ", text).split())  # "read me the last four digits"
    proof = w.PROOF.intersection(tokens) or w.IDENTITY.intersection(tokens)
    if not own and proof and w.GATE.search(text) and w.GIVE.search(text):
        return {"verify"}
    return set()


def _yours(tokens: list[str]) -> bool:
    """The sentence is about the other side's things and none of the speaker's own."""
    return "your" in tokens and "my" not in tokens and "mine" not in tokens


def _theirs(after: list[str], bare_you: bool) -> bool:
    """The verb's object is the other side's: ``your <noun>`` (not the company's own), ``you``, ``for you``; the
    speaker's own (``my``) first ends the search."""
    for k, token in enumerate(after):
        if token in {"my", "mine", "myself"}:
            return False
        if token == "your":
            noun = next((t for t in after[k + 1 : k + 4] if t not in {"current", "recent", "new", "old"}), "")
            return noun not in w.COMPANY_NOUNS
        if token == "you" and ((k == 0 and bare_you) or (k > 0 and after[k - 1] == "for")):
            return True
    return False


def _record(words: list[str], pronoun: bool) -> bool:
    """The verb's object is a service record named by a determiner ("that order", "the status of the booking"; "it"
    when ``pronoun``), not its identifier ("the order number") and not a later phrase's ("... for the order")."""
    for k, token in enumerate(words[:6]):
        if token in {"my", "mine"} or (k > 0 and token in w.PREPOSITIONS) or (k == 0 and token == "to"):
            return False  # the speaker's own, or past the object
        if token in {"it", "them", "this", "that"} and k == 0 and (words[1:2] == [] or words[1] not in w.RECORDS):
            mine = {"my", "mine", "myself", "down"}.intersection(words[1:6])  # "flag it to my bank", "note it down"
            return pronoun and not mine  # "I'll escalate this": a pronoun is a record only to a service-only verb
        if token in w.DETERMINERS:
            at = next((j for j in range(k + 1, min(k + 3, len(words))) if words[j] in w.RECORDS), None)
            if at is not None:
                return at + 1 >= len(words) or words[at + 1] not in w.OWN_IDS
    return False


def _asks_self(tokens: list[str], at: int | None) -> bool:
    """The speaker asks about its own doing ("can I apply it?", "I wonder if I can ..."): no offer."""
    if at is None or at == 0:
        return False
    return tokens[at - 1] in {"can", "could", "should", "if", "whether", "do", "am", "way"}  # "any way we can ..."


def _asks_other(before: list[str]) -> bool:
    """A question to the other side ("can you", "would you like me to") is not an offer by the speaker, except
    "would you like me to ...", which is."""
    asks = any(a in {"can", "could", "would", "will"} and b == "you" for a, b in itertools.pairwise(before))
    return asks and not any(a == "like" and b == "me" for a, b in itertools.pairwise(before))


def _identity(words: list[str]) -> bool:
    return any(word in w.IDENTITY for word in words[:2]) or "birth" in words[:3]


def agent_acts(text: str) -> list[str]:
    """The agent's speech acts in ``text`` (``offer``, ``report``, ``verify``, ``greet``; ``ask``, ``apologize``,
    ``policy``, ``instruct`` from ``speech_asks.py``), in the order found."""
    found: list[str] = []
    low = text.lower().replace("’", "'")
    if w.LABEL.search(text) or w.VOICE.search(low):
        found.append("greet")
    if w.READS.search(low) or w.DELIVERED.search(low):
        found.append("report")  # "I see here that your order was shipped"
    plain = w.PHRASE.sub(lambda m: w.PHRASES[m.group(0)], low)  # one verb for each idiom
    for sentence in w.SENTENCES.findall(plain):
        tokens = w.TOKENS.findall(sentence)
        for act in sorted(_sentence_acts(tokens) | asks_and_stances(sentence.strip(), tokens)):
            if act not in found:
                found.append(act)
    return found
