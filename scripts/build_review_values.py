"""Write ``engine/review/tau_values.txt``: the value words of τ's databases the grounding check looks for.

The customer review (``engine/review/facts.py``) treats a word of this list as a fact: a customer that says "the
blue one", "leather", "Denver" or "Smartphone" must have read it in its instructions, its tools or the
conversation. Words come from τ²'s retail, airline and telecom databases and τ-bench v1's retail and airline data:
item option values, product names, people's first and last names, cities, cabins, memberships, plans, device
models and phone apps. Everyday words are taken out, so that the list holds values, not language: words of τ's
own policy texts (the agent's rules are written in everyday language; colours, cabins, memberships and phone apps
are kept), words of two letters or fewer, and :data:`EVERYDAY`.

    PYTHONPATH=$PWD python scripts/build_review_values.py
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tau2
import tau_bench
import tomllib

EVERYDAY = set(
    "good great fine nice best better bad poor fair excellent fast slow new old big small large little high low "
    "full half light dark soft hard long short round square clear standard regular basic premium plus pro max mini "
    "ultra home office travel outdoor indoor portable digital manual automatic smart wireless wired free open "
    "closed single double triple none yes other plain simple classic modern natural original sport active every "
    "level mode type style size color colour material capacity power battery screen inch inches hours hour minutes "
    "liters liter cups pieces piece feet foot assistant back side share space fixed "
    "built custom memory night water warm quiet fresh auto press wall operation removal brand family women road "
    "expert beginner intermediate professional equivalent degrees sensors resistant upright linear machine maker "
    "reader timer filter air art bed cup ear gas kit lbs led mah mat men non pet tea usa usb lcd ssd rgb ipx tpe pvc "
    "iot worth neck san los bar card cover not over cellular".split()
)
"""Everyday words that are also option values: a customer says them about anything, so they are kept out (
a colour is kept even where a policy's example names it: "the blue one" is an item option)."""


def _strings(obj: Any, keys: set[str]) -> Iterator[str]:
    """Every string under one of ``keys`` anywhere in ``obj``."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, str):
                yield v
            elif k == "options" and isinstance(v, dict):
                yield from (str(x) for x in v.values())
            else:
                yield from _strings(v, keys)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v, keys)


COLOURS = set("red blue green black white gray grey silver gold brown yellow pink purple beige navy orange".split())
KEYS = {"app_name", "first_name", "last_name", "city", "name", "cabin", "membership", "model", "brand", "state"}
KEYS |= {"country"}


def main() -> None:
    t2 = Path(tau2.__file__).parent / "data" / "tau2" / "domains"
    v1 = Path(tau_bench.__file__).parent / "envs"
    sources: list[Any] = [json.loads((t2 / d / "db.json").read_text()) for d in ("retail", "airline")]
    sources.append(tomllib.loads((t2 / "telecom" / "db.toml").read_text()))
    sources.append(tomllib.loads((t2 / "telecom" / "user_db.toml").read_text()))
    sources += [json.loads(p.read_text()) for d in ("retail", "airline") for p in (v1 / d / "data").glob("*.json")]
    policy_text = " ".join(
        p.read_text()
        for p in [t2 / "retail" / "policy.md", t2 / "airline" / "policy.md", *(t2 / "telecom").glob("*.md")]
        + [v1 / "retail" / "wiki.md", v1 / "airline" / "wiki.md"]
    )
    policy = set(re.findall(r"[a-z]+", policy_text.lower()))
    named = {"cabin", "membership", "app_name"}
    kept = {w for s in sources for t in _strings(s, named) for w in re.findall(r"[a-z]+", t.lower())}
    words: set[str] = set()
    for source in sources:
        for text in _strings(source, KEYS):
            words.update(re.findall(r"[a-z]+", text.lower()))
    kept |= COLOURS
    keep = sorted(w for w in words if len(w) > 2 and (w in kept or w not in policy) and w not in EVERYDAY)
    out = Path(__file__).resolve().parents[1] / "slime_tau_plugin" / "engine" / "review" / "tau_values.txt"
    header = "# τ's database value words (scripts/build_review_values.py); one per line\n"
    out.write_text(header + "\n".join(keep) + "\n")
    print(f"{len(keep)} words -> {out}")


if __name__ == "__main__":
    main()
