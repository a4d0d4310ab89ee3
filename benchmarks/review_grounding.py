"""The customer review's extractor and speech-act classifier, measured on every τ domain (issue 40 §1, §2).

1. **Coverage**: of the fact-like values each task's instructions state, the share the extractor
   (``engine/review/facts.py``) finds. A task's fact-like values are the leaf values of its reference actions'
   arguments (ids, names, zip codes, emails, dates, amounts, cabins, flight numbers, ...) and, in retail, the
   option values of the items they name (colours, sizes, materials, "clicky", "1000ml") that its instructions spell
   out; a value is found when every letter and digit of its occurrence lies inside an extracted span.
2. **Speech acts** (``engine/review/speech_acts.py``): agent messages detected / total, and customer messages
   falsely detected / total. Agent messages: the built-in oracle policy's text turns in the clean runs of
   ``benchmarks/user_review.py`` (``--runs``), plus τ's own fixed agent line (the transfer message), plus the
   agent turns of τ²'s task histories (``initial_state.message_history``: only τ²'s mock domain has any; v1 none).
   Customer messages: the stand-ins' turns in those runs (scripted and serve-user: the opening, the "go ahead",
   the telecom tool reports), every distinct instruction of every split as the stand-ins' opening, and each test
   task's instructions turned into first-person customer sentences ("You want to cancel your order" -> "I want
   to cancel my order").
3. **Cost**: µs per customer message of each.

    PYTHONPATH=$PWD python benchmarks/review_grounding.py --runs runs/user_review \
        [--trajectories tau-bench/historical_trajectories/gpt-4o-airline.json]

``--trajectories``: τ-bench's published trajectories (a real LLM customer, gpt-4, against a real agent, gpt-4o):
their agent text turns count as agent messages and their user turns as customer messages, each distinct text once.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.review.facts import stated_facts
from slime_tau_plugin.engine.review.speech_acts import agent_acts

SETS = (("tau2", "retail"), ("tau2", "airline"), ("tau2", "telecom"), ("tau1", "retail"), ("tau1", "airline"))
NOT_FACTS = {"yes", "no", "true", "false", "True", "False"}
"""Argument values that answer a question rather than state a fact (insurance: "no")."""
TAU_AGENT_LINES = ("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.",)
_SWAP = {"you": "I", "your": "my", "yours": "mine", "yourself": "myself", "you're": "I'm", "you've": "I've",
         "you'll": "I'll", "you'd": "I'd", "are": "am"}  # fmt: skip


def leaves(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for v in obj.values():
            yield from leaves(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from leaves(v)
    elif isinstance(obj, str | int | float) and not isinstance(obj, bool):
        yield str(obj)


def item_options(benchmark: str) -> dict[str, list[str]]:
    """Retail item id -> its option values (what a customer calls the item it wants: "clicky", "RGB", "1000ml")."""
    import tau2
    import tau_bench

    if benchmark == "tau2":
        products = json.loads((Path(tau2.__file__).parent / "data/tau2/domains/retail/db.json").read_text())["products"]
    else:
        products = json.loads((Path(tau_bench.__file__).parent / "envs/retail/data/products.json").read_text())
    return {i: [str(v) for v in var["options"].values()] for p in products.values() for i, var in p["variants"].items()}


def coverage(benchmark: str, domain: str) -> tuple[int, int, list[str]]:
    backend = get_backend(benchmark)
    options = item_options(benchmark) if domain == "retail" else {}
    found = total = 0
    missed: list[str] = []
    for ref in backend.task_refs(domain, "test"):
        script = backend.script(ref)
        text = script.user_instructions
        spans = [(f.start, f.start + len(f.text)) for f in stated_facts(text)]
        values = {v for a in script.gold_actions for v in leaves(a.arguments) if len(v) > 1} - NOT_FACTS
        values |= {o for v in list(values) for o in options.get(v, ())}  # the items' options, where it names them
        for value in sorted(values):
            hit = re.search(rf"(?<![\w#]){re.escape(value)}(?!\w)", text, re.I)
            if hit is None:
                continue
            at = hit.start()
            total += 1
            chars = [at + k for k, c in enumerate(value) if c.isalnum()]
            if all(any(a <= c < b for a, b in spans) for c in chars):
                found += 1
            else:
                missed.append(value)
    return found, total, missed


_YOU = re.compile(r"\b(you(?:r|rs|rself|'re|'ve|'ll|'d)?|are)\b", re.I)


def first_person(instructions: str) -> list[str]:
    """The instructions as a customer would say them: sentences with you/your turned into I/my."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", instructions):
        if not re.search(r"\byou", sentence, re.I):
            continue
        words = _YOU.sub(lambda m: _SWAP.get(m.group(1).lower(), m.group(1)), sentence)
        out.append(words.strip())
    return out


def run_messages(runs: Path, benchmark: str, domain: str) -> tuple[list[str], list[str]]:
    """(agent text turns, customer turns) of the clean runs of one set."""
    agent: list[str] = []
    customer: list[str] = []
    for kind in ("scripted", "served"):
        path = runs / f"{benchmark}_{domain}_{kind}" / "samples.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            messages = json.loads(line)["metadata"].get("messages") or []
            for m in messages[1:]:
                text = str(m.get("content") or "")
                if m.get("role") == "user":
                    customer.append(text)
                elif m.get("role") == "assistant" and "<tool_call>" not in text and text.strip():
                    agent.append(re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip())
    return agent, customer


def task_histories() -> list[str]:
    """The agent turns of τ²'s task histories (``initial_state.message_history``): only the mock domain has any."""
    import tau2

    root = Path(tau2.__file__).parent / "data" / "tau2" / "domains"
    out = []
    for path in sorted(root.glob("*/tasks.json")):
        for task in json.loads(path.read_text()):
            history = (task.get("initial_state") or {}).get("message_history") or []
            out += [str(m["content"]) for m in history if m.get("role") == "assistant" and m.get("content")]
    return out


def trajectories(paths: list[str]) -> tuple[list[str], list[str]]:
    """(agent text turns, customer turns) of τ-bench's historical trajectories, each distinct text once."""
    agent: set[str] = set()
    customer: set[str] = set()
    for path in paths:
        for run in json.loads(Path(path).read_text()):
            for m in run.get("traj") or []:
                text = str(m.get("content") or "").strip()
                if text and m.get("role") == "assistant":
                    agent.add(text)
                elif text and m.get("role") == "user":
                    customer.add(text)
    return sorted(agent), sorted(customer)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="runs/user_review", help="benchmarks/user_review.py's --out")
    p.add_argument("--trajectories", nargs="*", default=[], help="τ-bench historical_trajectories/*.json")
    ns = p.parse_args()
    runs = Path(ns.runs)
    cov = ["| set | values in the instructions | found | share | missed (examples) |", "|---|---:|---:|---:|---|"]
    acts = [
        "| set | agent messages: detected / total | customer messages (runs): falsely detected / total "
        "| instructions as an opening, every split: falsely detected / total "
        "| customer sentences (instructions): falsely detected / total |",
        "|---|---:|---:|---:|---:|",
    ]
    history = task_histories()
    detected = sum(bool(agent_acts(t)) for t in history)
    acts_history = f"| tau2 task histories (mock) | {detected} / {len(history)} | | | |"
    if ns.trajectories:
        real_agent, real_customer = trajectories(ns.trajectories)
        hit = sum(bool(agent_acts(t)) for t in real_agent)
        false_real = [t for t in real_customer if agent_acts(t)]
        names = ", ".join(Path(t).stem for t in ns.trajectories)
        acts_history += (f"\n| τ-bench trajectories ({names}) | {hit} / {len(real_agent)} | "
                         f"{len(false_real)} / {len(real_customer)} | | |")  # fmt: skip
        for t in false_real:
            print(f"false: trajectories: {agent_acts(t)} {t[:160]!r}", file=sys.stderr)
    every_customer: list[str] = []
    for benchmark, domain in SETS:
        found, total, missed = coverage(benchmark, domain)
        cov.append(f"| {benchmark}/{domain} test | {total} | {found} | {found / max(total, 1):.3f} | "
                   f"{', '.join(sorted(set(missed))[:4])} |")  # fmt: skip
        agent, customer = run_messages(runs, benchmark, domain)
        agent += TAU_AGENT_LINES
        backend = get_backend(benchmark)
        refs = backend.task_refs(domain, "test")
        sentences = [s for ref in refs for s in first_person(backend.script(ref).user_instructions)]
        every = [r for split in backend.splits(domain) for r in backend.task_refs(domain, split)]
        openings = sorted({backend.script(r).user_instructions for r in every})
        false_open = [t for t in openings if agent_acts(t)]
        hit_agent = sum(bool(agent_acts(t)) for t in agent)
        false_runs = [t for t in customer if agent_acts(t)]
        false_sent = [t for t in sentences if agent_acts(t)]
        shapes = len({re.sub(r":.*", ":", t) for t in agent})  # the oracle's templates, whatever they name
        acts.append(f"| {benchmark}/{domain} | {hit_agent} / {len(agent)} ({shapes} templates) | "
                    f"{len(false_runs)} / {len(customer)} | "
                    f"{len(false_open)} / {len(openings)} | {len(false_sent)} / {len(sentences)} |")  # fmt: skip
        for t in (false_runs + false_sent)[:5]:
            print(f"false: {benchmark}/{domain}: {agent_acts(t)} {t[:160]!r}", file=sys.stderr)
        for t in sorted({t for t in agent if not agent_acts(t)})[:6]:
            print(f"missed agent: {benchmark}/{domain}: {t[:160]!r}", file=sys.stderr)
        every_customer += customer + sentences
    t0 = time.perf_counter()
    for t in every_customer:
        agent_acts(t)
    acts_us = (time.perf_counter() - t0) / max(len(every_customer), 1) * 1e6
    t0 = time.perf_counter()
    for t in every_customer:
        stated_facts(t)
    facts_us = (time.perf_counter() - t0) / max(len(every_customer), 1) * 1e6
    print("\n".join(cov))
    print()
    print("\n".join([*acts, acts_history]))
    print()
    short = [t for t in every_customer if len(t) < 300]
    t0 = time.perf_counter()
    for t in short:
        agent_acts(t)
        stated_facts(t)
    short_us = (time.perf_counter() - t0) / max(len(short), 1) * 1e6
    print(f"cost over {len(every_customer)} customer messages: speech acts {acts_us:.0f} µs, facts {facts_us:.0f} µs "
          f"per message; both on the {len(short)} under 300 characters: {short_us:.0f} µs")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
