"""The speech-act classifier's vocabulary (``speech_acts.py``): which words make a subject, a service verb, a
record, a place only the service works in, a cue that an act is done *for the other side*, the service's voice.

Kept apart from the classifier so the rules read in one place and the word lists in another. A word here is a
feature's evidence, never a phrase to match whole: a new wording is caught when its parts are. Imports nothing from
the package.
"""

from __future__ import annotations

import re


class Cues:
    """Patterns each behind a literal it needs: a substring test skips the regex on most text (a few µs each)."""

    def __init__(self, *pairs: tuple[str, str]) -> None:
        self.pairs = tuple((needle, re.compile(rx)) for needle, rx in pairs)

    def search(self, text: str) -> bool:
        return any(needle in text and rx.search(text) for needle, rx in self.pairs)


SENTENCES = re.compile(r"[^.!?\n]+[.!?]*")
TOKENS = re.compile(r"[a-z]+(?:'[a-z]+)?|[?]")
FIRST = {"i", "we", "i'm", "i've", "i'll", "i'd", "we're", "we've", "we'll", "we'd", "me", "let's", "us"}
FIRST |= {"im", "ive", "weve", "ill"}  # lowercase, no apostrophe
SECOND = {"you", "you're", "you've", "you'll", "you'd"}
OTHER_SUBJECTS = {"he", "she", "they", "it", "someone", "somebody", "agent", "representative", "which", "who", "there"}
OTHER_SUBJECTS |= SECOND
VERBS = (
    "look check pull find locate search review process cancel refund modify update change book rebook exchange "
    "return issue apply submit place initiate arrange escalate resolve fix handle transfer reset verify confirm "
    "authenticate help assist serve add remove credit waive reactivate activate enable disable upgrade downgrade "
    "suspend resume reship replace reissue refill refuel schedule reschedule create open sort note flag send do see "
    "ensure complete finalize contact email retrieve adjust offer proceed put lock secure reserve reverse switch move "
    "link attach grab make provision connect"
).split()
OFFER = {"can", "could", "will", "'ll", "i'll", "we'll", "shall", "would", "happy", "glad", "let", "allow", "gladly"}
OFFER |= set("here may let's going gonna ill moment second sec minute unable".split())
"""Also "I'm here to help", "how may I", "let's get ...", "give me a second to ...", "I'm unable to ..."."""
DONE = {"i've", "we've", "ive", "weve", "have", "has", "just", "already", "successfully", "been", "able"}
SERVICE_ONLY = set(
    "pull locate process issue apply waive credit refund reissue note flag escalate authenticate".split()
)
"""Verbs only the service performs on a record: "I've noted the change on the account" needs no other cue."""
CUSTOMER_VERBS = {"place", "book", "return", "exchange", "create", "open", "order", "see", "do", "make"}
"""What a customer does to its own records ("I placed the order"): a bare record never makes them the service's."""
FOR_YOU_ONLY = {"see", "do"}
"""Verbs that are the service's only "for you": "let me see what I can do for you", not "I see your point"."""
RECORDS = {
    "order", "orders", "reservation", "reservations", "booking", "bookings", "refund", "return", "exchange",
    "account", "flight", "flights", "trip", "ticket", "tickets", "plan", "line", "bill", "payment", "request",
    "change", "changes", "status", "details", "information", "info", "options", "case", "claim", "subscription",
    "cancellation", "modification", "item", "items", "package", "shipment", "fee", "fees", "charge", "penalty",
    "insurance", "seat", "seats", "bag", "bags", "baggage", "luggage", "certificate", "voucher",
}  # fmt: skip
"""The service's records: acted on with "the/that/this" and a service cue, they are the other side's."""
OWN_IDS = {"number", "id", "ids", "code", "email", "receipt", "confirmation"}
"""After a record noun, the customer's own identifier of it: "I can look for the order number"."""
DEVICE = {
    "phone", "device", "settings", "setting", "airplane", "mode", "data", "roaming", "apn", "wifi", "wi", "sim",
    "signal", "bars", "router", "modem", "internet", "connection", "app", "apps", "vpn", "network", "battery",
    "screen", "mms", "sms", "permission", "permissions",
}  # fmt: skip
"""A telecom customer acts on its own device: the weak cues ("on my end", a bare record) never count there."""
DETERMINERS = {"the", "that", "this", "these", "those", "it", "them", "a", "an", "any", "other", "some"}
PREPOSITIONS = {"for", "in", "with", "from", "at", "about", "into", "by", "when", "if", "but", "and"}
ARTICLES = {"a", "an", "the", "my", "your", "this", "our", "any", "no"}
"""Before a verb-looking word, a noun's: "a refund", "the issue", "my return" are things, not acts."""
SERVICE_PLACE = re.compile(r"\bour (?:system|records?|database|backend|back end)\b")
"""Where only the service acts: a customer has no system, records or back end."""
MY_END = re.compile(
    r"\b(?:on|from) (?:my|our) (?:end|side)\b|\bthe (?:system|records|database|backend|back end)\b|\bon file\b"
    r"|\b(?:on|from|to) (?:the|this|that) (?:order|account|reservation|booking|profile)\b"
)
"""The service's place unless the customer's own things are in the clause ("my order isn't in the system", "I
restarted the phone on my end")."""
TO_THEM = Cues(
    ("you", r"\byou(?:'ll| will| should) (?:get|receive|see|be getting|be receiving)\b"),
    ("should ", r"\bshould (?:show up|reflect|appear)\b"),
    ("will ", r"\bwill (?:go back to|be (?:credited|refunded|issued|returned|sent|emailed|mailed|processed))\b"),
    ("as ", r"\bas (?:requested|you requested|discussed)\b"),
    ("if you", r"\bif you(?:'d| would)? (?:like|want|wish|prefer)\b"),
    ("for you", r"\bfor you\b"),
    *((w, rf"\b{w}\b") for w in ("all set", "just now", "right away", "shortly", "successfully", "allow me")),
    ("done", r"^done\b"),
    ("ahead", r"\b(?:gone|went) ahead\b"),
    ("you asked", r"\byou asked (?:for|about)\b"),
    *((w, rf"\b(?:one|a|just a|give me a) {w}\b") for w in ("moment", "sec", "second", "minute")),
)
"""The act is done for the other side: what they will receive, what they asked for, an offer at their wish."""
COMPANY_NOUNS = set(
    "website site store shop policy policies system company team service services app end side help support records "
    "department manager supervisor colleague name time patience assistance airline offer terms agents staff hotline "
    "website's agent".split()
)
IDENTITY = set(
    "email e-mail name zip zipcode postal id identity phone number birth dob birthday address account pin password "
    "passcode membership passport username user".split()
)
ASK = re.compile(
    r"\b(?:(?:could|can|would|will) you|please|may i|can i|could i|what is|what's"
    r"|(?<!do )(?:i|we)(?:'ll| will| just)? need)\b"
)
GIVE = re.compile(
    r"\b(?:(?:could|can|would|will) you|please)(?: please| first| kindly)*"
    r" (?:confirm|verify|provide|give|share|tell|spell|read)"
    r"|\bwhat(?:'s| is) the\b"
    r"|\b(?<!do )(?:i|we)(?:'ll| will|'m going to| am going to|'re going to)? need (?:the|your|a)\b"
    r"|\b(?:may|could|can) i (?:please )?(?:have|get)\b"
)
"""A request that the other side hand something over (not "do I need to provide ...", which asks)."""
GATE = re.compile(
    r"\b(?:first|before (?:we|i) (?:continue|proceed|go|begin|start|can|make)|to (?:locate|find|access|pull up|"
    r"proceed|get started|verify|look up)|so (?:that )?i can (?:verify|locate|access|pull up|find|look up))\b"
)
"""A request the service gates its work on: "could you first confirm ...", "before we continue"."""
TOLD_ME = re.compile(r"\b(?:tell|give|read|send) me\b")
"""The other side asked to hand over to the speaker: "me" there is not the speaker's own thing."""
PROOF = {"digits", "card", "four", "ssn", "security"}
PROOF_WORDS = PROOF | IDENTITY | {"verification", "authenticate", "e", "mail"}
SECURITY = re.compile(
    r"\b(?:for (?:your )?(?:security|verification)|verify (?:the|your) identity|authenticate you"
    r"|(?:verify|confirm|make sure) (?:that )?it's (?:really )?you)\b"
)
HELP_VERBS = {"help", "assist", "serve"}
SEND_VERBS = {"send", "email"}
ARTIFACTS = set("label confirmation link voucher itinerary update certificate ticket tickets code details".split())
"""What the service sends the other side ("I'll email you the shipping label"); a customer sends its own."""
YOU_VERBS = HELP_VERBS | set(
    "transfer refund credit upgrade downgrade rebook book reschedule offer switch move connect".split()
)
"""Verbs whose bare ``you`` object is the other side ("I'll transfer you"); "I can confirm you have it" is not."""
LABEL = re.compile(
    r"^\s*(?:>\s*)?\**\s*(?:agent|assistant|representative|customer (?:service|support))\s*\**\s*:", re.I | re.M
)
"""A role label opening a line, the first or a later one ("Yes please.\n\nAgent: ..."): a transcript continued."""
VOICE = Cues(
    ("thank", r"\bthank(?:s| you)(?: so much| very much| a lot| again)? for"
     r" (?:contacting|calling|reaching out|getting in touch|choosing|shopping with"
     r"|your (?:call|purchase|inquiry)"
     r"|flying with|being a (?:valued|loyal)|your (?:business|loyalty))\b"),
    ("welcome to", r"\bwelcome to\b"),
    ("reached", r"\byou(?:'ve| have) reached\b"),
    ("valued customer", r"\bvalued customer\b"),
    ("<tool_call>", "<tool_call>"),
    ('"arguments"', r"\"arguments\"\s*:\s*\{"),
    ("anything else", r"\bis there anything else\s*\?"),
    ("anything", r"\b(?:anything|something) (?:else|more|further) (?:that )?(?:i|we) (?:can|could|may) (?:help|assist)"
     r"|\b(?:anything|something) (?:else|more|further) (?:that )?(?:i|we) (?:can|could|may) do for you\b"
     r"|\banything else you'd like (?:help|assistance) with\b"),
    *((w, rf"\b{w} (?:that )?(?:i|we) (?:could|was able to|were able to) (?:help|assist)\b"
       rf"|\b{w} to have (?:helped|assisted|been of)\b") for w in ("glad", "happy", "pleased")),
    *((w, rf"\b{w} (?:else )?(?:can|may|could) (?:i|we) (?:help|assist|do for you)\b") for w in ("how", "what")),
    ("pleasure", r"\b(?:it was|it's been) (?:my|our) pleasure\b|\bpleasure (?:assisting|helping|serving) you\b"),
    ("close", r"\b(?:i'll|let me|we'll) (?:go ahead and )?close (?:this|the case|the ticket|the chat|it) out\b"),
    ("inconvenience", r"\b(?:apologi[sz]e|sorry) for any inconvenience\b"
     r"|\bapologi[sz]e for the inconvenience (?:this|that) (?:has|may have) caused\b"),
    ("our ", r"\b(?:per|according to|under|as per) our (?:policy|policies|terms)\b|\bour records (?:show|indicate)\b"),
    ("like to proceed", r"\bwould you like to proceed\b"),
    ("please confirm", r"\bplease confirm (?:if|whether|that) you(?:'d| would)? like to\b"),
    ("value your", r"\bwe (?:truly |really )?value your (?:loyalty|business)\b"),
    ("we appreciate", r"\bwe (?:truly |really )?appreciate your (?:patience|business|loyalty)\b"),
    ("speaking", r"\byou(?:'re| are) speaking (?:with|to)\b"),
    ("anything else", r"\banything else (?:on your mind|you'd like to (?:know|discuss|ask))\b"),
    ("all set", r"\byou(?:'re| are) all set\b(?!\s*\?)"),
    ("let us know", r"\blet us know if\b"),
    ("satisfaction", r"\byour satisfaction\b"),
    ("your", r"\b(?:as|i'm|i am|i'll be|i will be) your (?:\w+ )?"
     r"(?:assistant|agent|representative|rep|advisor|specialist)\b"),
    ("calling", r"\byou(?:'re| are) (?:calling|contacting us|reaching out|writing in|inquiring) (?:about|regarding)\b"),
    ("you", r"\bto (?:better )?(?:assist|serve) you\b|\bto help you (?:better|further)\b"),
    ("while", r"\bthank(?:s| you)(?: so much)? for (?:your patience|bearing with me|waiting|holding) while (?:i|we)"
     r" (?:\w+ ){0,2}(?:checked|looked|reviewed|pulled|processed|verified|searched|confirmed|updated|worked)\b"
     r"(?!.*\bmy\b)"),
    ("assured", r"\brest assured\b"),
    ("for your", r"\bfor your (?:security|protection|privacy)\b"),
    ("right for you", r"\b(?:make|set|put) (?:this|it|things|that) right for you\b"),
    ("our ", r"\bour (?:\w+ )?(?:team|department|specialists?|agents?|staff) (?:will|can|is going to|'ll)"
     r" (?:\w+ ){0,3}(?:you|your)\b"),
    ("as a", r"\bas a (?:one-time |special |goodwill )?(?:courtesy|gesture of goodwill|goodwill gesture)\b"
     r"(?![^.?!]*\?)"),
    (" in ", r"\b(?:let me|i'll|i will|i'm going to|i am going to) (?:loop|bring) in (?:our|a|the)\b"),
    ("questions", r"\bif you have any (?:other |more |further |additional )?questions? (?:about|regarding|on) your\b"),
    ("our ", r"\b(?:according to|per|based on) our (?:records|system|database|files)\b"
     r"|\bour (?:system|database|files) (?:shows?|indicates?)\b"),
    ("you ", r"\b(?:let me|i'll|i will|i'm going to|i am going to|i can|allow me to|we'll)"
     r" (?:\w+ )?(?:get|send|pass|put|hand|patch|route|bring) you (?:over |through |along |right |off )?to\b"),
    ("while", r"\b(?:one|a|just a) (?:moment|sec|second|minute)(?: please)?,? while (?:i|we)\b(?!.*\bmy\b)"),
    ("sorry to hear", r"\b(?:i'm|we're|i am|we are) (?:so |very |really |truly )?sorry to hear"
     r" (?:about )?(?:that )?your\b"
     r"|\bwe're (?:so |very |really |truly )?sorry to hear\b"),
    ("to help", r"(?:^|[,.!] )(?:always )?(?:happy|glad) to (?:help|assist)\s*[!.]"),
    ("brings you", r"\bwhat brings you\b"),
    ("hesitate", r"\bdon't hesitate to (?:reach out|contact us|call us|get in touch)\b"),
    ("if you need", r"\bif you need (?:any )?(?:more |further |additional |other )?(?:help|assistance)\b"),
    ("here to", r"\b(?:i'm|i am|we're|we are|i'll be|we'll be) (?:always |happy |glad )?(?:here )?to (?:help|assist)"),
    ("feel free", r"\bfeel free to (?:reach out|contact us|call us|get in touch)\b"),
    ("you need", r"\byou need (?:any )?(?:further |more |additional )?(?:help|assistance) with\b"),
    ("looking forward", r"\blooking forward to (?:assisting|helping|serving) you\b"),
    ("please hold", r"\bplease hold(?: on)? (?:for a moment|while|a moment|one moment)\b"),
)  # fmt: skip
"""The service's voice: thanking the other side for coming, closing with what else *it* can do for them."""


def forms(verb: str) -> list[str]:
    """Every inflection of ``verb`` the classifier reads: check/checks/checked/checking, cancel(l)ed, placing,
    modified."""
    stem = verb[:-1] if verb.endswith("e") else verb
    doubled = verb + verb[-1] if verb[-1] in "lprt" and verb[-2] in "aeiou" else verb
    forms = [verb, verb + "s", verb + "es", verb + "d", verb + "ed", stem + "ing", doubled + "ed", doubled + "ing"]
    return forms + [verb[:-1] + "ied", verb[:-1] + "ies"] if verb.endswith("y") else forms


IRREGULAR = {
    "found": "find",
    "taken": "handle",
    "sent": "send",
    "did": "do",
    "done": "do",
    "does": "do",
    "made": "make",
}
FORMS = {form: verb for verb in VERBS for form in forms(verb)} | IRREGULAR


PHRASES = {"make sure": "ensure", "take care of": "handle", "reach out": "contact", "reaching out": "contacting",
           "take a look at": "look at", "dig into": "look into", "digging into": "looking into",
           "bring up": "pull up", "bringing up": "pulling up", "brought up": "pulled up",
           "go through": "review", "going through": "reviewing", "gone through": "reviewed",
           "went through": "reviewed", "take a quick look at": "look at", "take a closer look at": "look at",
           "have a look at": "look at", "have a quick look at": "look at"}  # fmt: skip
PHRASE = re.compile("|".join(PHRASES))
OPENERS = set(
    "ok okay sure alright right great perfect thanks so and now just one a sec second moment currently".split()
)
"""What may come before a sentence that starts at its verb ("okay, pulling that up for you")."""
INSPECT = {"check", "look", "review", "search", "locate", "pull"}
"""Verbs of reading records: offered on a named record with none of the speaker's own things, the service's
("let me check the details of the order", "I can check on flight HAT045")."""
PERFECT = {"i've", "we've", "ive", "weve", "just", "already", "have", "has"}
FOUND = re.compile(
    r"\bhere(?:'s| is) what (?:i|we) (?:found|see|have|pulled up|can see|was able to find|can offer|can do)\b"
)
SUMMARY = re.compile(r"\bhere(?:'s| is) (?:a |the |my |our )?(?:quick |brief )?(?:summary|recap|rundown)\b")
"""The service summing up (a customer's summary is of "my" things, which the caller rules out)."""
RESTATED = {"cancel", "return", "exchange", "modify", "change", "update", "book", "rebook", "refund", "upgrade",
            "downgrade", "reschedule", "remove", "add", "switch"}  # fmt: skip
"""The service acts a summary of the other side's request names ("you'd like to cancel ...")."""
SUMMING_UP = {"so", "confirm", "summarize", "summarise", "recap", "summary", "discussed", "understand", "correctly"}
"""What opens the service's summary of the request ("to recap, you'd like to ..."): no instruction reads so."""
SPEAKER = {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "me"}
"""The service laying out what it found in the other side's records ("here's what I found: - order ...")."""
EVALUATIONS = {"eligibility", "availability", "fare", "fares"}
"""What only the service assesses: "let me verify the eligibility of those items" is the service at work."""
SETTLED = {"complete", "confirm", "process", "update", "modify", "finalize", "submit", "issue"}
"""A record "now <settled>" in a statement is the service closing its work ("the exchange is now complete")."""
SUBORDINATORS = {"after", "when", "if", "once", "until", "before", "because", "since", "while", "that", "which"}
"""A new clause: "your balance after all these changes are complete" is not about "your"."""
RECEIPTS = {"refund", "confirmation", "email", "label", "credit", "voucher", "certificate", "update", "charge"}
RECEIPTS |= {"text", "notification"}
"""What the service tells the other side it will receive ("you should see the refund in a few days")."""
READS = Cues(
    ("your", r"\byour (?:account|profile|reservation|booking|order history) (?:shows?|indicates?|lists?)\b"),
    ("showing", r"\b(?:i'm showing|i am showing|i'm seeing) (?:here )?(?:that )?the"
     r" (?:order|reservation|booking|account|flight|refund|return|exchange|payment|plan|line|bill)s?\b"),
    ("your", r"\b(?:i (?:can )?see|i'm seeing|i'm showing|i show|it looks like|looks like)"
     r" (?:here |on my end |in the system )?(?:that )?your"
     r" (?:order|reservation|booking|account|flight|refund|return|exchange|payment|plan|line|bill)s?\b"),
)  # fmt: skip
"""The service reading the other side's records to them: "I see here that your order was shipped"."""
DELIVERED = Cues(
    ("been", r"\byour (?:\w+ )?(?:order|reservation|booking|request|return|refund|exchange|ticket|claim|case"
     r"|payment|flight|subscription|plan|cancellation) (?:has|have) been (?:\w+ly )?\w+(?:ed|en)\b"),
    ("way", r"\byour (?:\w+ )?(?:refund|order|package|replacement|label|voucher|credit|shipment|item|items)"
     r" (?:is|are|will be) on (?:its|their|the) way\b|\bon (?:its|their) way (?:back )?to your\b"),
    ("allow", r"\b(?:please|kindly) allow (?:up to |about |around )?\d+(?:\s*(?:-|to)\s*\d+)?"
     r" (?:business |working )?days\b"),
    ("your", r"\b(?:should|will) (?:hit|reach|appear (?:in|on)|show up (?:in|on)|post to|arrive in) your"
     r" (?:account|card|statement|bank|inbox|email)\b"),
    ("to you", r"\b(?:will be|has been|have been|'ve been|is being|was)"
     r" (?:emailed|credited|refunded|issued|mailed|texted) (?:back )?to you\b"),
)  # fmt: skip
"""What the service delivered to the other side: "tracking will be emailed to you"."""
