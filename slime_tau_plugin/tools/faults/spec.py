"""Fault injection as data: which faults, how often, how many times and where (tests, soaks; off by default).

A spec is one string, from ``slime-tau serve --faults`` or the ``TAU_FAULTS`` environment variable
(``TAU_FAULTS_SEED`` makes the draws reproducible)::

    spec   := entry ("," entry)*
    entry  := [target "."] kind ["=" param] ":" rate ["@" cap]
    target := policy | user | judge | env      (none: every target the kind applies to)
    rate   := the chance per request, 0..1
    cap    := inject at most this many times (``http_500:1.0@3`` fails exactly the first 3 requests)
    param  := the kind's number: seconds for ``slow`` and ``env_hang``, Retry-After seconds for ``http_429``

    TAU_FAULTS="http_500:0.05,reset:0.02,slow=3:0.01,user.http_429=1:0.02,env_raise:0.001@5"

``http_5NN`` is any 5xx status (``http_503``). This module only parses and decides (:class:`FaultInjector`:
one per server or installed env wrapper, thread-safe, counting what it injected); the servers
(``servers/fault_injection.py``) and the env wrapper (``faults/env.py``) carry the faults out. It imports
nothing of the engine but its errors. The variables are read when a tool asks (:func:`spec_from_env`), once.
"""

from __future__ import annotations

import enum
import os
import random
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slime_tau_plugin.engine.errors import ConfigError

SPEC_VAR = "TAU_FAULTS"
SEED_VAR = "TAU_FAULTS_SEED"
TARGETS = ("policy", "user", "judge", "env")
"""Who injects: the SGLang-protocol server, the OpenAI-compatible user and judge servers, the env wrapper."""


class FaultKind(str, enum.Enum):
    """Every fault the built-in servers and the env wrapper can inject (the spec's ``kind``)."""

    REFUSE = "refuse"
    """The server closes the connection before reading the request body."""
    RESET = "reset"
    """The server sends the headers and half the body, then drops the connection."""
    HTTP_5XX = "http_5xx"
    """An HTTP 5xx answer (``http_500``, ``http_503``...)."""
    HTTP_429 = "http_429"
    """HTTP 429 with ``Retry-After: <param>`` (default 1 s)."""
    SLOW = "slow"
    """The answer comes ``param`` seconds late (default 10 s): past a short client timeout."""
    INVALID_JSON = "invalid_json"
    """A 200 whose JSON body is cut in half."""
    CONTEXT_LENGTH = "context_length"
    """HTTP 400 with SGLang's context-length message."""
    ABORT = "abort"
    """This request finishes with ``abort`` (half its output), as after ``/abort_request {rid}``."""
    ABORT_ALL = "abort_all"
    """Every in-flight request is aborted, this one included (slime's end-of-step ``abort_all``)."""
    LOGPROB_MISMATCH = "logprob_mismatch"
    """``output_ids`` and the log-probs have different lengths."""
    EMPTY_OUTPUT = "empty_output"
    """No output ids, finish ``stop``."""
    SPECIAL_TOKENS = "special_tokens"
    """``<|im_end|>`` and ``<|endoftext|>`` ids inserted in the middle of the sampled turn."""
    MALFORMED_CALL = "malformed_call"
    """The turn is a tool call whose JSON does not parse."""
    UNKNOWN_TOOL = "unknown_tool"
    """The turn calls a tool the domain does not have."""
    MULTI_CALL = "multi_call"
    """The turn's tool call is sent twice (several calls in one turn)."""
    EMPTY_REPLY = "empty_reply"
    """The user or judge answers with empty content."""
    TOOL_CALLS_ONLY = "tool_calls_only"
    """The user answers with a tool call and no content."""
    ENV_RAISE = "env_raise"
    """An env ``step`` (agent or user tool) raises."""
    ENV_HANG = "env_hang"
    """An env ``step`` sleeps ``param`` seconds (default: ``tau_env_timeout_s`` + 1), past its timeout."""
    REWARD_RAISE = "reward_raise"
    """The episode's reward call raises."""
    INVENTED_ID = "invented_id"
    """The customer states an identifier its instructions never gave (an order id, email, zip code or user id)."""
    PASTED_INSTRUCTIONS = "pasted_instructions"
    """After its opening, the customer pastes its whole scenario into a reply."""
    AS_AGENT = "as_agent"
    """The customer writes the agent's part ("Agent: ... How can I help you today?") before its own."""
    LOOP = "loop"
    """The customer gets stuck: from that reply on it sends the same message every turn."""
    EARLY_STOP = "early_stop"
    """The customer ends the conversation at once, whatever the agent was doing."""


TRANSPORT_KINDS = frozenset(
    {FaultKind.REFUSE, FaultKind.RESET, FaultKind.HTTP_5XX, FaultKind.HTTP_429, FaultKind.SLOW, FaultKind.INVALID_JSON}
)
"""Faults of the HTTP exchange itself, the same on every server (``servers/http_base.py``)."""
MODEL_KINDS = frozenset(
    {
        FaultKind.CONTEXT_LENGTH,
        FaultKind.ABORT,
        FaultKind.ABORT_ALL,
        FaultKind.LOGPROB_MISMATCH,
        FaultKind.EMPTY_OUTPUT,
        FaultKind.SPECIAL_TOKENS,
        FaultKind.MALFORMED_CALL,
        FaultKind.UNKNOWN_TOOL,
        FaultKind.MULTI_CALL,
    }
)
"""Faults in what the policy server generates (``servers/fault_injection.py``)."""
CHAT_KINDS = frozenset({FaultKind.EMPTY_REPLY, FaultKind.TOOL_CALLS_ONLY})
"""Faults in what the user or judge server answers."""
CUSTOMER_KINDS = frozenset(
    {FaultKind.INVENTED_ID, FaultKind.PASTED_INSTRUCTIONS, FaultKind.AS_AGENT, FaultKind.LOOP, FaultKind.EARLY_STOP}
)
"""A customer that answers well-formed and wrong (``servers/customer_faults.py``): what the review must catch."""
ENV_KINDS = frozenset({FaultKind.ENV_RAISE, FaultKind.ENV_HANG, FaultKind.REWARD_RAISE})
"""Faults of the τ environment (``faults/env.py``)."""

APPLIES_TO: dict[str, frozenset[FaultKind]] = {
    "policy": TRANSPORT_KINDS | MODEL_KINDS,
    "user": TRANSPORT_KINDS | CHAT_KINDS | CUSTOMER_KINDS,
    "judge": TRANSPORT_KINDS | CHAT_KINDS,
    "env": ENV_KINDS,
}
_PARAM_KINDS = {FaultKind.SLOW: 10.0, FaultKind.HTTP_429: 1.0, FaultKind.ENV_HANG: None}
"""Kinds that take ``=param`` and their default (None: the injector's user decides)."""
_HTTP_5XX = re.compile(r"http_(5\d\d)")
_ENTRY = re.compile(
    r"(?:(?P<target>[a-z]+)\.)?(?P<kind>[a-z0-9_]+)(?:=(?P<param>[^:@]*))?:(?P<rate>[^@]*)(?:@(?P<cap>.*))?"
)


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One spec entry."""

    kind: FaultKind
    name: str
    """As written (``http_503``): the key faults are counted under."""
    rate: float
    cap: int | None = None
    """At most this many injections; None: no limit."""
    param: float | None = None
    """Seconds (``slow``, ``env_hang``, ``http_429``'s Retry-After) or the status (``http_5xx``)."""
    target: str | None = None
    """Only this target; None: every target the kind applies to."""

    def applies_to(self, target: str) -> bool:
        return (self.target is None or self.target == target) and self.kind in APPLIES_TO[target]

    def __str__(self) -> str:
        where = f"{self.target}." if self.target else ""
        param = "" if self.param is None or self.kind is FaultKind.HTTP_5XX else f"={self.param:g}"
        cap = "" if self.cap is None else f"@{self.cap}"
        return f"{where}{self.name}{param}:{self.rate:g}{cap}"


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """A parsed spec: its rules in order (the first that fires wins) and the seed of the draws."""

    rules: tuple[FaultRule, ...]
    seed: int | None = None

    @classmethod
    def parse(cls, text: str, *, seed: int | None = None, source: str = SPEC_VAR) -> FaultSpec:
        """Parse ``text`` (see the module docstring); ``source`` names the flag or variable in errors.

        Raises:
            ConfigError: one line naming the bad entry, what is wrong and what is expected.
        """
        rules = [_parse_entry(entry.strip(), source) for entry in text.split(",") if entry.strip()]
        seen: set[tuple[str | None, str]] = set()
        for rule in rules:
            if (rule.target, rule.name) in seen:
                raise ConfigError(f"{source}: {rule.name!r} is listed twice; give each kind once per target")
            seen.add((rule.target, rule.name))
        return cls(tuple(rules), seed)

    def for_target(self, target: str) -> tuple[FaultRule, ...]:
        return tuple(rule for rule in self.rules if rule.applies_to(target))

    def __str__(self) -> str:
        return ",".join(str(rule) for rule in self.rules)


def _parse_entry(entry: str, source: str) -> FaultRule:
    expected = "expected [target.]kind[=param]:rate[@cap], e.g. http_500:0.05 or slow=3:0.01@10"
    match = _ENTRY.fullmatch(entry)
    if match is None:
        raise ConfigError(f"{source}: entry {entry!r} is malformed; {expected}")
    target, name = match["target"], match["kind"]
    if target is not None and target not in TARGETS:
        raise ConfigError(f"{source}: target {target!r} in {entry!r} is unknown; expected one of {', '.join(TARGETS)}")
    status = _HTTP_5XX.fullmatch(name)
    kind = FaultKind.HTTP_5XX if status else _kind(name, entry, source)
    if target is not None and kind not in APPLIES_TO[target]:
        where = ", ".join(t for t in TARGETS if kind in APPLIES_TO[t])
        raise ConfigError(f"{source}: kind {name!r} does not apply to target {target!r}; it applies to {where}")
    rate = _number(match["rate"], f"rate {match['rate']!r} of {name!r}", source, "a number in [0, 1]")
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"{source}: rate {match['rate']!r} of {name!r} must be a number in [0, 1]")
    cap = None
    if match["cap"] is not None:
        if not match["cap"].isdigit() or int(match["cap"]) < 1:
            raise ConfigError(f"{source}: cap {match['cap']!r} of {name!r} must be an integer >= 1")
        cap = int(match["cap"])
    param: float | None = float(status.group(1)) if status else _PARAM_KINDS.get(kind)
    if match["param"] is not None:
        if kind not in _PARAM_KINDS:
            takes = ", ".join(k.value for k in _PARAM_KINDS)
            raise ConfigError(f"{source}: kind {name!r} takes no '=' parameter; only {takes} do")
        param = _number(match["param"], f"parameter {match['param']!r} of {name!r}", source, "seconds >= 0")
        if param < 0:
            raise ConfigError(f"{source}: parameter {match['param']!r} of {name!r} must be seconds >= 0")
    return FaultRule(kind, name, rate, cap, param, target)


def _kind(name: str, entry: str, source: str) -> FaultKind:
    try:
        kind = FaultKind(name)
    except ValueError:
        kind = None
    if kind is None or kind is FaultKind.HTTP_5XX:
        names = sorted(k.value for k in FaultKind if k is not FaultKind.HTTP_5XX) + ["http_5NN (e.g. http_503)"]
        raise ConfigError(f"{source}: kind {name!r} in {entry!r} is unknown; expected one of {', '.join(names)}")
    return kind


def _number(text: str, what: str, source: str, expected: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{source}: {what} must be {expected}") from None


class FaultInjector:
    """Decides, request by request, which fault (if any) one server or process injects, and counts them.

    Each rule draws from its own generator (seeded from the spec's seed, the target and the rule), so adding
    a rule does not change when the others fire. Thread-safe: server handlers call it from many threads.
    """

    def __init__(self, spec: FaultSpec, target: str) -> None:
        if target not in TARGETS:
            raise ConfigError(f"fault target {target!r} is unknown; expected one of {', '.join(TARGETS)}")
        self.spec = spec
        self.target = target
        self.rules = spec.for_target(target)
        self._rngs = [
            random.Random(f"{spec.seed}/{target}/{i}/{rule}") if spec.seed is not None else random.Random()
            for i, rule in enumerate(self.rules)
        ]
        self._counts = dict.fromkeys((rule.name for rule in self.rules), 0)
        self._draws = 0
        self._lock = threading.Lock()

    def draw(self, kinds: Iterable[FaultKind]) -> FaultRule | None:
        """The fault to inject into this request among ``kinds`` (the first rule that fires), or None."""
        wanted = set(kinds)
        with self._lock:
            self._draws += 1
            hit = None
            for rule, rng in zip(self.rules, self._rngs, strict=True):
                if rule.kind not in wanted:
                    continue
                fires = rng.random() < rule.rate  # drawn even when another rule fired: reproducible per rule
                if hit is None and fires and (rule.cap is None or self._counts[rule.name] < rule.cap):
                    hit = rule
            if hit is not None:
                self._counts[hit.name] += 1
            return hit

    def record(self, rule: FaultRule) -> None:
        """Count ``rule`` as injected when a generator decided it itself (per conversation, not per request)."""
        with self._lock:
            self._counts[rule.name] += 1

    def counts(self) -> dict[str, int]:
        """Faults injected so far, by the name written in the spec."""
        with self._lock:
            return dict(self._counts)

    def report(self) -> dict[str, object]:
        """What ``GET /faults`` answers: the target, its rules, the seed and the counts."""
        with self._lock:
            injected, draws = dict(self._counts), self._draws
        rules = ",".join(str(rule) for rule in self.rules)
        return {"target": self.target, "spec": rules, "seed": self.spec.seed, "draws": draws, "injected": injected}


def spec_from_env(environ: Mapping[str, str] | None = None) -> FaultSpec | None:
    """The spec ``TAU_FAULTS`` holds (seeded by ``TAU_FAULTS_SEED``), or None when it is unset or empty.

    The one reader of these variables: fault injection is a test and soak switch, kept out of ``TauConfig``.

    Raises:
        ConfigError: a bad spec or seed.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(SPEC_VAR, "").strip()
    if not text:
        return None
    return FaultSpec.parse(text, seed=seed_from_env(environ))


def seed_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """``TAU_FAULTS_SEED`` as an int, or None when unset.

    Raises:
        ConfigError: it is not an integer.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(SEED_VAR, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{SEED_VAR}={text!r} must be an integer") from None


def injector_for(target: str, spec_text: str | None, *, source: str = SPEC_VAR) -> FaultInjector | None:
    """An injector for ``target`` from a flag's text, else from ``TAU_FAULTS``; None when neither names a fault
    that applies to ``target``.

    Raises:
        ConfigError: a bad spec or seed.
    """
    if spec_text is not None and spec_text.strip():
        spec: FaultSpec | None = FaultSpec.parse(spec_text, seed=seed_from_env(), source=source)
    else:
        spec = spec_from_env()
    if spec is None or not spec.for_target(target):
        return None
    return FaultInjector(spec, target)
