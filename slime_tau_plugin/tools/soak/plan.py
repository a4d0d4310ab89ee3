"""What one soak run does: its settings, the ``--outage`` grammar and each target's fault spec.

``--fault-rate R`` is the chance that a request (or env call) meets *some* fault: it is spread evenly over
the kinds that apply to each target, so adding kinds does not raise the total. Each target gets its own
spec string: the policy server's ``--faults``, the user server's ``--faults`` and ``TAU_FAULTS`` in the
soak's own process for the env wrapper. ``--kinds`` entries are ``[target.]kind[=param]`` and are checked
by ``faults.py``'s own parser, so a bad kind reads exactly as it does in ``slime-tau serve --faults``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.faults.spec import APPLIES_TO, CUSTOMER_KINDS, FaultKind, FaultSpec

SOAK_TARGETS = ("policy", "user", "env")
"""Who injects faults in a soak (the retail reward asks no judge)."""
OUTAGE_TARGETS = ("user", "policy")


@dataclass(frozen=True, slots=True)
class Outage:
    """``TARGET:DURATION@AT``: kill the target's server ``at_s`` after it first answered an episode's request,
    restart it on the same port ``duration_s`` later."""

    target: str
    duration_s: float
    at_s: float

    def __str__(self) -> str:
        return f"{self.target}:{self.duration_s:g}s@{self.at_s:g}s"


@dataclass(frozen=True, slots=True)
class SoakSettings:
    """Everything ``slime-tau soak`` was asked to do (flags, checked)."""

    episodes: int
    concurrency: int
    fault_rate: float
    kinds: tuple[str, ...]
    """``[target.]kind[=param]`` entries; every kind is drawn at ``fault_rate / len(kinds for the target)``."""
    outages: tuple[Outage, ...] = ()
    seed: int | None = None
    tokenizer: str = ""
    domain: str = "retail"
    split: str = "train"
    outage_tolerance_s: float = 300.0
    request_timeout_s: float = 10.0
    """Policy, user and env timeouts: ``slow`` and ``env_hang`` faults are set just past them."""
    user_latency_ms: float = 0.0
    policy_latency_ms: float = 0.0
    max_replies: int = 2
    user_max_inflight: int | None = 64
    policy_max_inflight: int | None = None
    episode_timeout_s: float | None = None
    sample_timeout_s: float = 1800.0
    """A ``generate`` that has not returned after this long is cancelled and counted lost."""
    json_path: str | None = None

    def fault_specs(self) -> dict[str, str]:
        """Each target's spec string (empty: no faults), e.g. ``{"policy": "reset:0.005,...", "env": ""}``."""
        if self.fault_rate == 0:
            return dict.fromkeys(SOAK_TARGETS, "")
        specs = {}
        for target in SOAK_TARGETS:
            mine = [entry for entry in self.kinds if _applies(entry, target)]
            rate = self.fault_rate / len(mine) if mine else 0.0
            specs[target] = ",".join(f"{_TARGET_PREFIX.sub('', entry)}:{rate:.6g}" for entry in mine)
        return specs


def default_kinds(request_timeout_s: float) -> tuple[str, ...]:
    """Every kind a soak target can inject; ``slow`` answers a little after the clients' timeout. A wrong customer
    (``CUSTOMER_KINDS``) is not a fault of the transport: benchmarks/user_review.py measures those."""
    kinds = []
    for kind in FaultKind:
        if kind is FaultKind.HTTP_5XX:
            kinds += ["http_500", "http_503"]
        elif kind is FaultKind.SLOW:
            kinds.append(f"slow={request_timeout_s + 2:g}")
        elif kind not in CUSTOMER_KINDS and any(kind in APPLIES_TO[target] for target in SOAK_TARGETS):
            kinds.append(kind.value)
    return tuple(kinds)


def parse_kinds(text: str) -> tuple[str, ...]:
    """``--kinds``: a comma list of ``[target.]kind[=param]``; the rate comes from ``--fault-rate``.

    Raises:
        ConfigError: a malformed or unknown entry (``faults.py``'s message), a rate written in it, or a kind
            that no soak target injects.
    """
    entries = tuple(entry.strip() for entry in text.split(",") if entry.strip())
    if not entries:
        raise ConfigError("--kinds is empty; expected a comma list such as reset,http_503,user.empty_reply")
    repeated = sorted({entry for entry in entries if entries.count(entry) > 1})
    if repeated:
        raise ConfigError(f"--kinds: {', '.join(repeated)} listed twice; give each kind once")
    for entry in entries:
        if ":" in entry or "@" in entry:
            raise ConfigError(f"--kinds: {entry!r} has a rate or cap; --fault-rate sets the rate, write the kind only")
    for entry in entries:
        try:
            FaultSpec.parse(f"{entry}:0", source="--kinds")
        except ConfigError as exc:  # faults.py quotes the entry with the rate the soak added; drop it
            raise ConfigError(str(exc).replace(f"'{entry}:0'", f"'{entry}'")) from None
        if not any(_applies(entry, target) for target in SOAK_TARGETS):
            raise ConfigError(f"--kinds: {entry!r} applies to no soak target ({', '.join(SOAK_TARGETS)})")
    return entries


def _applies(entry: str, target: str) -> bool:
    rule = FaultSpec.parse(f"{entry}:0", source="--kinds").rules[0]
    return rule.applies_to(target)


_TARGET_PREFIX = re.compile(r"^[a-z]+\.(?=[a-z])")
_OUTAGE = re.compile(r"(?P<target>[a-z]+):(?P<duration>[^@]+)@(?P<at>.+)")
_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<unit>ms|s|m)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def outage(text: str) -> Outage:
    """argparse ``type=`` for ``--outage TARGET:DURATION@AT`` (``user:30s@60s``; units ms, s, m; default s)."""
    expected = "expected TARGET:DURATION@AT, e.g. user:30s@60s (TARGET: user or policy)"
    match = _OUTAGE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is malformed; {expected}")
    if match["target"] not in OUTAGE_TARGETS:
        raise argparse.ArgumentTypeError(f"target {match['target']!r} in {text!r} is unknown; {expected}")
    return Outage(match["target"], _seconds(match["duration"], text), _seconds(match["at"], text))


def _seconds(part: str, text: str) -> float:
    match = _DURATION.fullmatch(part.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{part!r} in {text!r} is not a duration; expected e.g. 30s, 1.5m, 500ms")
    return float(match["number"]) * _UNIT_S[match["unit"]]
