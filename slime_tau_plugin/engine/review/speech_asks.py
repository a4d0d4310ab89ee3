"""The service's asks and stances in a customer message: what ``speech_acts.py`` reads besides offers and reports.

A customer asks the agent questions, apologises for itself and quotes policy it read; the service asks the *other
side* to choose among its options ("which of your orders ...", "would you prefer a refund to the original payment
method or a gift card?"), asks for the yes/no a write needs ("shall I go ahead and submit it?"), apologises for the
company's failure, states policy as the company ("our policy", "we can only ...", "I'm not able to modify an order
once ..."), and tells the other side what to do on its phone (τ² telecom's agent). Each is read off who is asked,
whose wish or device it is, and whether the speaker's own things are in the sentence (then it is the customer's):

- ``ask``: a question (or "let me know ...") to ``you`` about a wish (like, prefer, want, wish, 'd rather, looking
  to), not about what the other side wants the *speaker* to do or hand over (``me``, ``my``, an identifier) nor
  what the speaker will tell ("what would you like to know?"); "may I ask the reason"; the other side's options
  laid out ("here are your options") or a pick asked ("which would you prefer?", "do you have a preference?");
  the speaker's go-ahead before its own write ("shall I ...", "should I go ahead / proceed", "would you like me
  to proceed", "can I go ahead and process this for you?"; not "can we proceed?", which real customers ask, nor
  "should I return it or exchange it?"); a yes demanded ("(yes/no)", "confirm with a yes", "your permission");
- ``apologize``: a stated apology whose object is the other side's ("your order", not "your website" or "your
  question"; "caused you"; what it went through: "you've had to deal with") or whose speaker is the company ("we
  apologize" anywhere, "on our end/side", "on behalf of the company"), with no own fault ("I forgot", "my
  mistake"); empathy with the other side ("how frustrating this must be", "must be for you"). "Sorry for the
  inconvenience" alone is not: real customers apologise for it too;
- ``policy``: "our policy/rules", "not something we can do"; rules stated to the other side ("per the terms of
  your fare", "you're entitled to"); ``we`` + a limit (can only, cannot, don't) on a service verb, no ``our`` or
  ``my`` thing; ``I`` + a refusal (not able, unable, can't) on a service verb and a generic or the other side's
  record; a rule on a kind of record with the service's hedge ("items that have been opened cannot be returned,
  I'm afraid"); never in a question or with a source the speaker read;
- ``instruct``: a request or imperative (please, could you, go to, next, try ...ing; also after a colon or comma)
  of a device verb (restart, toggle, turn, run, open, tap, swipe) on the other side's device ("your phone",
  "airplane mode", "a speed test"), with no ``I``/``my``: a customer reports its own doings in the first person
  ("I went to settings and toggled airplane mode"), and "restart done" is a report.

Imports only ``speech_words`` (the service verbs, device words).
"""

from __future__ import annotations

import itertools
import re

from slime_tau_plugin.engine.review import speech_words as w

__all__ = ["asks_and_stances"]

OWN = {"i", "my", "mine", "me", "i'm", "i've", "i'd", "i'll", "myself", "im", "ive"}
WISH = {"like", "prefer", "want", "wish", "rather"}
WRITES = set(
    "proceed go submit process cancel finalize book modify change update exchange return refund place apply make "
    "complete issue execute rebook upgrade downgrade".split()
)
"""What needs the other side's yes before the service does it."""
HANDED = {"number", "id", "email", "zip", "code", "name", "address", "details", "screenshot", "receipt"}
"""What a customer offers to hand over ("would you like the order number?")."""
DEVICE_VERBS = set(
    "restart reboot toggle turn switch run open tap go check enable disable reset reinsert swipe press hold "
    "navigate head power unplug insert ensure remove".split()
)
"""What one does to a phone by hand ("make sure" reads as ensure)."""
HELD = re.compile(
    r"\b(?:your (?:phone|device|settings|sim|apn|wifi|wi-fi|mobile data|data|airplane|roaming|screen|status bar|"
    r"network settings|app|apps|battery|router|modem)|airplane mode|network settings|speed test|status bar|"
    r"sim card|apn settings|data roaming|wi-fi calling|wifi calling|mobile data|bars|your signal)\b"
)
"""The other side's device: only the customer holds it."""
REQUEST = re.compile(r"^(?:(?:next|now|then|first|okay|ok|alright|great|so|and)\s+)*(?:please\s+)?(?:try\s+)?(?:\w+)")
ASK_YOU = re.compile(r"\b(?:could|can|would|will) you(?: please| kindly| now| also| first| try)* (\w+)")
APOLOGY = re.compile(r"\b(?:sorry|apologi[sz]e|apologies|regret)\b")
OWN_FAULT = {"forgot", "meant", "gave", "misspoke", "mistake", "wrong", "typo", "misread", "remember"}
EMPATHY = re.compile(
    r"\b(?:must be|imagine how|understand how) (?:so |very |really )?(?:frustrating|stressful|upsetting)\b"
    r"|\bhow (?:frustrating|stressful|upsetting) (?:this|that|it) must be\b|\bunderstand your frustration\b"
    r"|\b(?:this|that|it) must (?:be|have been) (?:\w+ ){0,2}for you\b"
    r"|\bunderstand (?:your|the) (?:concern|concerns|frustration|disappointment|worry|worries|inconvenience)\b"
)
"""Empathy with the other side's trouble: "I understand how annoying this must be for you"."""
COMPANY = re.compile(
    r"\bwe(?:'re| are)? (?:sincerely |truly |deeply |so |very )?(?:apologi[sz]e|sorry|regret)\b"
    r"|\bon (?:our|the company's) (?:end|side|part)\b|\bwith us\b"
    r"|\bon behalf of (?:the|our) (?:\w+ )?(?:company|team|airline|store|staff|management)\b"
)
"""An apology in the company's voice: "we apologize", "the mix-up on our side", "on behalf of the company"."""
OPTIONS = re.compile(
    r"\bhere (?:are|is) (?:\w+ ){0,3}(?:options|choices|alternatives)\b"
    r"|\byour (?:\w+ )?(?:options|choices) (?:are|would be|include)\b"
    r"|\byou (?:have|'ve got|have got) (?:two|three|four|a few|several|some|\d+) (?:\w+ )?(?:options|choices)\b"
    r"|\byou can (?:choose|pick|select) (?:between|from|either)\b"
)
"""The service laying out the other side's options (a statement: "what are my options?" is the customer's)."""
CHOICE = re.compile(
    r"^(?:(?:so|and|now|then|okay|ok)\s+)*which\b(?:(?!\bthink\b|\brecommend\b).)*"
    r"\b(?:prefer|best|go with|choose)\b"
    r"|\b(?:suits? you|works? (?:best |better )?for you|sounds? (?:good|better|best) to you)\b"
    r"|\b(?:have|any) (?:a )?preference\b"
    r"|\bwhich(?: one)? (?:you'd|you would) (?:like|prefer)\s*[?.!]*$"
)
"""A question asking the other side to pick: "which would you prefer?", "would the 4pm one suit you better?"."""
POLICY = re.compile(r"\bour (?:policy|policies|rules|terms)\b|\b(?:not|isn't) something we can\b")
RULES = re.compile(
    r"\b(?:per|under|according to) (?:the |your )?(?:airline |company |store |fare )?"
    r"(?:terms|rules|policy|conditions)\b"
    r"|\boutside (?:of )?what (?:i'm|we're|i am|we are) (?:allowed|able|permitted) to\b"
    r"|\byou(?:'re| are) (?:entitled|eligible|allowed|permitted) to\b|\byou(?:'re| are) (?:entitled|eligible) for\b"
)
"""The rules applied to the other side, stated (not asked) and not by a speaker of its own things."""
THEIR_TROUBLE = re.compile(
    r"\byou(?:'ve| have)? (?:had to|been (?:dealing|going through|having)|experienced|went through)\b"
    r"|\byou(?:'re| are) (?:dealing with|going through|experiencing|having to)\b"
)
"""What the other side went through, the object of the service's apology ("sorry you've had to deal with this")."""
INELIGIBLE = re.compile(r"\b(?:is not|isn't|aren't|are not) (?:eligible|permitted|allowed|refundable)\b")
"""A rule stated on a record, the service's with its hedge ("I'm afraid that fare isn't eligible for changes")."""
QUOTED = {"says", "said", "read", "website", "site", "saw", "heard", "thought", "think"}
"""A customer quoting the rules it read ("the website says items that have been opened cannot be returned")."""
PLURAL_RECORDS = {"items", "orders", "tickets", "reservations", "flights", "bookings", "fares", "products"}
WE_LIMIT = re.compile(r"\bwe(?:'re| are)? (?:can only|cannot|can't|unable to|not able to|don't|do not) (\w+)")
I_REFUSE = re.compile(
    r"\b(?:i'm not able to|i am not able to|i'm unable to|i am unable to|i can't|i cannot|i won't be able to)"
    r"(?: actually| currently)? (\w+)"
)
LIMIT_VERBS = w.FORMS.keys() | {"allow", "permit", "accept", "offer", "honor", "waive", "refund", "provide"}
YESNO = re.compile(
    r"\byes ?/ ?no\b|\bdo you (?:agree|accept|consent) to\b|\(yes or no\)|\bwith a (?:yes|no)\b"
    r"|\banswer yes or no\b|\byour permission\b|\bplease (?:reply|respond|answer|type|say) (?:with )?['\"]?yes\b"
    r"|\bplease confirm (?:that )?you (?:understand|agree|accept|want|wish)\b"
    r"|(?:^|, )(?:reply|respond|answer) (?:with )?['\"]?yes\b|\b(?:a|an|the) (?:\w+ )?yes from you\b"
)
TOLD = {"know", "hear", "see", "have"}
"""After a wish: the speaker offers to tell or show ("what would you like to know?"), which a customer does."""
THEIR_OWN = w.COMPANY_NOUNS | {"question", "message", "answer", "reply", "last", "previous"}
"""After an apology's ``your``: the company's or the conversation's thing ("sorry, your website was down")."""
REPLY = re.compile(r"\b(?:let me know|tell me|i understand|call me back|get back to me)\b")
TRIP = re.compile(r"\bwill (?:you )?be (?:traveling|travelling|flying)\b")
WHERE_TO = re.compile(
    r"\b(?:which|what|where) (?:\w+ ){0,3}should (?:i|we) (?:put|apply|issue|credit|refund|process|charge)"
    r" (?:the|this|that|it)\b"
)
"""The speaker asking where its own write goes: "which card should I put the refund on?"."""
SELF_WRITE = re.compile(
    r"\bshall i (\w+)|\b(?:like|want) me to (\w+)|\bshould i (go ahead|proceed)\b"
    r"|\b(?:can|may) i (?:go ahead and )?(\w+)(?= .*\bfor you\b)"
)


def asks_and_stances(sentence: str, tokens: list[str]) -> set[str]:
    """The acts in one lowercased sentence (``tokens``: its words and ``?``): ask, apologize, policy, instruct."""
    acts: set[str] = set()
    spoken = REPLY.sub(" ", sentence)  # "let me know", "tell me": the speaker asks to be told, not its own things
    own = bool(OWN.intersection(REPLY.sub(" ", " ".join(tokens)).split()))
    question = tokens[-1:] == ["?"]
    asked = question or "let me know" in sentence  # "let me know which of the orders you'd like me to cancel"
    device = bool(w.DEVICE.intersection(tokens))
    if asked and (_asks_wish(tokens) or _asks_write(sentence, device)) or YESNO.search(sentence):
        acts.add("ask")
    if question and TRIP.search(sentence) and not own:
        acts.add("ask")  # "how many passengers will be traveling?"
    if question and WHERE_TO.search(sentence) and not {"my", "mine", "me", "myself"}.intersection(tokens):
        acts.add("ask")
    if not own and ((asked and CHOICE.search(sentence)) or (not question and OPTIONS.search(sentence))):
        acts.add("ask")  # "here are your options: ...", "which would you prefer?"
    if "may i ask" in sentence and not {"my", "mine"}.intersection(tokens) and not device:
        acts.add("ask")  # "may I ask the reason for the cancellation?"
    if (
        not question
        and _apologizes(sentence, tokens)
        or EMPATHY.search(sentence)
        and not {"my", "me", "mine"}.intersection(tokens)
    ):
        acts.add("apologize")
    mine = {"my", "mine", "me"}.intersection(tokens) or QUOTED.intersection(tokens)
    hedged = " ".join(tokens).replace("i'm afraid", " ").split()  # the service's hedge, not its own things
    generic = not OWN.intersection(hedged) and _generic_rule(tokens)  # "since X cannot be upgraded, I don't ..."
    generic = generic or (not OWN.intersection(hedged) and bool(INELIGIBLE.search(sentence)))
    generic = generic and bool({"unfortunately", "afraid"}.intersection(tokens))  # the service's bad news, hedged
    rules = not question and not mine and (RULES.search(sentence) or generic)
    if POLICY.search(sentence) or rules or _limits(sentence, tokens, question, own):
        acts.add("policy")
    clauses = [] if question else re.split(r"[:;,]", spoken)[1:]  # "let's try something: turn your phone off"
    own = own and bool(OWN.intersection(re.sub(r"\bfor me\b", " ", spoken).split()))  # "... again for me?"
    if not own and HELD.search(spoken) and any(_instructs(c) for c in [spoken, *clauses]):
        acts.add("instruct")
    return acts


def _asks_wish(tokens: list[str]) -> bool:
    """A question about the other side's wish: ``you`` (``you'd``) then a wish verb, not followed by ``me``/``my``
    (what the other side wants the speaker to do or give) nor by an identifier the speaker hands over."""
    for k, token in enumerate(tokens):
        looking = tokens[k + 1 : k + 3] == ["looking", "to"]  # "are you looking to exchange it or ...?"
        if token in {"you", "you'd"} and (looking or any(t in WISH for t in tokens[k + 1 : k + 3])):
            rest = tokens[k + 1 : k + 12]
            if {"me", "my", "mine", "i"}.intersection(rest) or HANDED.intersection(rest) or len(rest) < 3:
                return False  # "do you want my user id?", "is that what you want?"
            told = any(a == "to" and b in TOLD for a, b in itertools.pairwise(rest[:5]))
            return not told  # "what would you like to know?": the speaker will tell
    return False


def _asks_write(sentence: str, device: bool) -> bool:
    """The speaker asks for the go-ahead of its own write: "shall I go ahead and submit it?", "would you like me to
    proceed?", not "should I restart my phone?" (a device) nor "shall I send you the order number?"."""
    if device or re.search(r"\bmy\b|\bmine\b|\bmyself\b", sentence):
        return False
    for m in SELF_WRITE.finditer(sentence):
        said = next(g for g in m.groups() if g).split()[0]
        if w.FORMS.get(said, said) in WRITES:
            return True
    return False


def _apologizes(sentence: str, tokens: list[str]) -> bool:
    """An apology for the other side's trouble or the company's failure, none of the speaker's own fault."""
    m = APOLOGY.search(sentence)
    if m is None:
        return False
    rest = w.TOKENS.findall(REPLY.sub(" ", sentence[m.end() :]))
    if OWN.intersection(rest) or OWN_FAULT.intersection(rest):
        return False  # "sorry, I forgot my order number", "I apologize, I gave you the wrong zip"
    company = tokens[:1] in (["we"], ["we're"], ["our"]) or bool(COMPANY.search(sentence))
    yours = next((rest[k + 1] for k, t in enumerate(rest[:-1]) if t == "your"), None)
    theirs = (yours is not None and yours not in THEIR_OWN) or bool(re.search(r"\bcaused (?:to )?you\b", sentence))
    theirs = theirs or bool(THEIR_TROUBLE.search(sentence))  # "I'm sorry you've had to deal with this"
    return company or theirs


def _limits(sentence: str, tokens: list[str], question: bool, own: bool) -> bool:
    """Policy in the company's mouth: "we can only refund to ...", "I'm not able to modify an order once ..."."""
    if question:
        return False
    m = WE_LIMIT.search(sentence)
    if m and m.group(1) in LIMIT_VERBS - {"make", "do", "see"} and not {"our", "my", "ourselves"}.intersection(tokens):
        return True
    m = I_REFUSE.search(sentence)
    if m is None or m.group(1) not in LIMIT_VERBS or w.DEVICE.intersection(tokens):
        return False
    rest = sentence[m.end() :].split()[:6]
    if {"my", "mine", "website", "online", "app", "myself"}.intersection(rest):
        return False
    generic = any(a in {"a", "an", "any"} and b in w.RECORDS for a, b in itertools.pairwise(rest))
    return generic or "your" in rest


def _instructs(sentence: str) -> bool:
    """A request or an imperative of a device verb: "please toggle ...", "could you restart ...", "go into ..."."""
    m = REQUEST.match(sentence.strip())
    first = m.group(0).split()[-1] if m else ""
    first = first[:-3] if first.endswith("ing") and m and " try " in f" {m.group(0)} " else first  # try turning
    after = sentence.strip()[m.end() :].split()[:1] if m else []
    if first in DEVICE_VERBS and after not in (["done"], ["done:"], ["done,"], ["complete"], ["finished"], ["is"]):
        return True  # an imperative: "go to your settings and turn on data roaming"
    asked = ASK_YOU.search(sentence)
    if asked and _device_verb(asked.group(1)):
        return True  # "could you please restart your device and ..."
    return bool(re.search(r"\bplease (?:\w+ )?(\w+)", sentence)) and any(
        f"please {v}" in sentence for v in DEVICE_VERBS
    )


def _device_verb(word: str) -> bool:
    """``word`` is a device verb or its -ing form ("removing", "reinserting", "restarting")."""
    if word in DEVICE_VERBS:
        return True
    base = word[:-3] if word.endswith("ing") else ""
    return bool(base) and bool({base, base + "e", base[:-1]}.intersection(DEVICE_VERBS))


def _generic_rule(tokens: list[str]) -> bool:
    """A rule on a kind of record: "items that have been opened cannot be returned" (a plural record, then a
    modal limit on a passive service verb). Only with the service's hedge: a customer restates rules plainly."""
    if not PLURAL_RECORDS.intersection(tokens):
        return False
    for k in range(len(tokens) - 2):
        if tokens[k] in {"cannot", "can't"} or tokens[k : k + 2] in (["can", "only"], ["may", "not"]):
            at = k + 2 if tokens[k + 1] in {"be", "only"} else k + 1
            at = at + 1 if tokens[at : at + 1] == ["be"] else at
            if at < len(tokens) and w.FORMS.get(tokens[at]) and tokens[at].endswith(("ed", "en")):
                return True
    return False
