"""The customer review against held-out faults: shapes its checks were not written for (issue 40).

For each τ² domain and τ-bench v1 domain (test split, the built-in oracle policy), three runs:

1. clean, ``tau_user=scripted``;
2. clean, ``tau_user=llm`` on ``slime-tau serve-user --max-replies 2`` (also each task's reference: its writes);
3. held-out: the same server, ``--faults-set paraphrased --faults`` :data:`FAULTS` (telecom: :data:`FAULTS_TELECOM`;
   ``TAU_FAULTS_SEED=7``): invented facts of ten shapes, the service's speech acts in the customer's mouth, stops
   and transfer requests (``tools/servers/customer_faults_paraphrased.py``); ``--faults-set freeform``: the set
   written blind to the checks (``tools/servers/customer_faults_freeform.py``), the same kinds inside natural
   replies. The set is printed with the tables and kept in each held-out run's ``faults_set.txt``.

Ground truth is the server's log (``GET /faults/log``), never the text: an entry belongs to the episode whose
opening holds its scenario and whose customer said its text (a stop: that ended as a user stop at its turn). A
stop is a ``premature_stop`` when the agent's last message asked the customer to act on its device, or the
episode made fewer writes (agent tool calls that change state, customer actions on its device) than the clean run
of the same task; else a ``stop_after_done`` (no fault: a control). Each kind is scored by the τ² tags a finding
carries, whatever check found it (:data:`EXPECTED`); per check, by the kinds its tags stand for.

    PYTHONPATH=$PWD python benchmarks/user_review_heldout.py [--out runs/user_review_heldout] [--tasks 0-19]
        [--faults-set {paraphrased,freeform,roleplay,slips}]
    PYTHONPATH=$PWD python benchmarks/user_review_heldout.py --out runs/user_review_heldout --rescore
    PYTHONPATH=$PWD python benchmarks/user_review_heldout.py --out runs/user_review_heldout --re-review

``--re-review`` scores the saved runs with the current ``speaks_as_agent`` check in place of the one that ran:
that check reads only the customer's words, which a review never changes, so a saved run replays exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from user_review import SETS, customer_texts, llm_user_flags, rollout, user_server

from slime_tau_plugin.engine.review.checks import ReviewInput, speaks_as_agent
from slime_tau_plugin.engine.review.verdict import ReviewCheck
from slime_tau_plugin.tools.servers.customer_values import absent
from slime_tau_plugin.tools.servers.fake_models import ASK_USER

FAULTS = "invented_id:0.3,as_agent:0.25,early_stop:0.15"
FAULTS_TELECOM = "invented_id:0.3,as_agent:0.25,early_stop:0.3"
"""Telecom's stops come oftener: with the oracle only there does a stop come before a required write (the
customer's own action on its phone); elsewhere the oracle writes before the customer's second message."""
EXPECTED = {
    "invented_fact": {"hallucination"},
    "agent_act": {"guideline_violation"},
    "premature_stop": {"premature_termination", "missed_required_action"},
}
"""A held-out kind -> the τ² tags a finding that catches it carries."""
_CALL = re.compile(r'"name":\s*"(\w+)"')
_READS = ("get_", "find_", "list_", "search_", "calculate", "think", "check_", "transfer_to_human")
_DEVICE_ACTION = "My phone shows:"  # serve-user's report after it ran one of its tools (a customer's write)
_ASK_DEVICE = re.compile(re.escape(ASK_USER) + r" \w+ \{")  # the oracle asks it to run one (not "next step")


def serve(
    out: Path, benchmark: str, domain: str, tasks: list[str], faults: str | None, faults_set: str = "paraphrased"
) -> tuple[list[dict], list]:
    with user_server(*(["--faults", faults, "--faults-set", faults_set] if faults else [])) as base:
        rows = rollout(out, benchmark, domain, *llm_user_flags(base), *tasks)
        log = json.loads(urllib.request.urlopen(base + "/faults/log", timeout=5).read())["injected"]
        (out / "faults_log.json").write_text(json.dumps(log))  # the ground truth, kept beside the samples
        if faults:
            (out / "faults_set.txt").write_text(faults_set + "\n")  # which generator wrote it
    return rows, log


def task_of(row: dict[str, Any]) -> str:
    """τ²'s task id, τ-bench v1's task index."""
    return str(row["metadata"].get("task_id", row["metadata"].get("task_index")))


def writes(row: dict[str, Any]) -> int:
    """State-changing steps: the agent's write tool calls and the customer's actions on its device."""
    messages = row["metadata"].get("messages", [])
    agent = [c for m in messages if m.get("role") == "assistant" for c in _CALL.findall(str(m.get("content") or ""))]
    own = sum(_DEVICE_ACTION in str(t) for t in customer_texts(row))
    return sum(not name.startswith(_READS) for name in agent) + own


def truth(rows: list[dict], log: list[dict], clean: dict[str, dict]) -> dict[int, dict[str, list[dict]]]:
    """Row position -> held-out kind -> the log entries it carries."""
    found: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for entry in log:
        for i, row in enumerate(rows):
            texts = customer_texts(row)
            if not texts or entry["scenario"] not in texts[0]:
                continue
            if entry["kind"] != "stop":
                at = [j for j, m in enumerate(row["metadata"]["messages"]) if m.get("content") == entry["text"]]
                if at and not any(e["text"] == entry["text"] for e in found[i][entry["kind"]]):
                    found[i][entry["kind"]].append({**entry, "index": at[0]})  # a twin task's twin entry: once
                continue
            if _ending(row) != "user_stop" or len(texts) != entry["turn"]:
                continue
            ref = clean.get(task_of(row))
            said = [str(m.get("content") or "") for m in row["metadata"]["messages"] if m.get("role") == "assistant"]
            waits = bool(said) and bool(_ASK_DEVICE.match(said[-1]))  # it stopped instead of acting on its phone
            early = waits or (ref is not None and writes(row) < writes(ref))
            if not found[i].get("premature_stop") and not found[i].get("stop_after_done"):  # a stop ends it: one
                found[i]["premature_stop" if early else "stop_after_done"].append(entry)
    return found


def _ending(row: dict[str, Any]) -> str | None:
    """How the episode ended before the review: a critical finding rewrites a user stop to ``user_error``, so the
    truth must not be read from what the check under test decided."""
    meta = row["metadata"]
    if meta.get("termination_reason") == "user_error" and (meta.get("tau_review") or {}).get("excluded"):
        return "user_stop" if (meta.get("tau_review") or {}).get("stop") else meta.get("termination_reason")
    return meta.get("termination_reason")


def findings(row: dict[str, Any]) -> list[dict[str, Any]]:
    return list((row["metadata"].get("tau_review") or {}).get("findings") or [])


def tables(rows: list[dict], found: dict[int, dict[str, list[dict]]]) -> list[str]:
    reviewed = [i for i, r in enumerate(rows) if r["metadata"].get("tau_review")]
    tags = {i: {t for f in findings(rows[i]) for t in f.get("tags", [])} for i in reviewed}
    lines = [
        "| held-out kind | expected τ² tags | injected (reviewed episodes) | caught | recall | flagged | precision |"
    ]
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for kind, want in EXPECTED.items():
        injected = [i for i in reviewed if found[i].get(kind)]
        hit = [i for i in reviewed if tags[i] & want]
        tp = sum(bool(tags[i] & want) for i in injected)
        lines.append(
            f"| {kind} | {', '.join(sorted(want))} | {len(injected)} | {tp} | {_ratio(tp, len(injected))} | "
            f"{len(hit)} | {_ratio(sum(bool(found[i].get(kind)) for i in hit), len(hit))} |"
        )
    lines += ["", "| check | its tags | kinds they stand for | injected | caught | recall | flagged | precision |"]
    lines.append("|---|---|---|---:|---:|---:|---:|---:|")
    checks: dict[str, set[str]] = defaultdict(set)
    for i in reviewed:
        for f in findings(rows[i]):
            checks[f["check"]] |= set(f.get("tags", []))
    for check, its in sorted(checks.items()):
        kinds = [k for k, want in EXPECTED.items() if want & its]
        injected = [i for i in reviewed if any(found[i].get(k) for k in kinds)]
        hit = [i for i in reviewed if any(f["check"] == check for f in findings(rows[i]))]
        tp = sum(i in hit for i in injected)
        good = sum(any(found[i].get(k) for k in kinds) for i in hit)
        lines.append(
            f"| {check} | {', '.join(sorted(its))} | {', '.join(kinds) or '-'} | {len(injected)} | {tp} | "
            f"{_ratio(tp, len(injected))} | {len(hit)} | {_ratio(good, len(hit))} |"
        )
    lines += [
        "",
        "| kind / shape | injected (in reviewed episodes) | caught (a finding with its tags at its message) |",
    ]
    lines.append("|---|---:|---:|")
    shapes: Counter[str] = Counter()
    caught: Counter[str] = Counter()
    for i in reviewed:
        for kind, entries in found[i].items():
            for entry in entries:
                key = f"{kind} / {entry.get('shape')}" + (" after a request" if entry.get("agent_asked") else "")
                shapes[key] += 1
                want = EXPECTED.get(kind, set())
                at = [f for f in findings(rows[i]) if want & set(f.get("tags", []))]
                caught[key] += (
                    any(f.get("message_index") == entry["index"] for f in at) if "index" in entry else bool(at)
                )
    lines += [f"| {key} | {n} | {caught[key]} |" for key, n in sorted(shapes.items())]
    facts = [(i, e) for i in reviewed for e in found[i].get("invented_fact", [])]
    seen = sum(not absent(e["value"], _agent_tool_results(rows[i])) for i, e in facts)
    lines += [
        "",
        f"Invented values that happen to be in the agent's own tool results (unseen by the customer): "
        f"{seen} of {len(facts)}.",
    ]
    return lines


def _agent_tool_results(row: dict[str, Any]) -> str:
    return "\n".join(
        str(m.get("content") or "") for m in row["metadata"].get("messages", []) if m.get("role") == "tool"
    )


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def saved(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def re_review(rows: list[dict]) -> list[dict]:
    """``rows`` with their ``speaks_as_agent`` findings recomputed by the current check (the others kept)."""
    for row in rows:
        review = row["metadata"].get("tau_review")
        if not review:
            continue
        reward = review.get("reward")
        episode = ReviewInput("", tuple(row["metadata"].get("messages", [])), float(reward or 0.0))
        kept = [f for f in review.get("findings") or [] if f["check"] != ReviewCheck.SPEAKS_AS_AGENT.value]
        review["findings"] = kept + [f.as_dict() for f in speaks_as_agent(episode)]
    return rows


def flags(rows: list[dict]) -> int:
    return sum(bool(findings(r)) for r in rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/user_review_heldout")
    p.add_argument("--tasks", default=None, help="positions in each test split, e.g. 0-19 (default: all)")
    p.add_argument("--rescore", action="store_true", help="score the runs already in --out; play nothing")
    p.add_argument(
        "--faults-set",
        choices=("paraphrased", "freeform", "roleplay", "slips"),
        default="paraphrased",
        help="the serve-user generator of the held-out run: paraphrased, freeform (written blind to the checks, "
        "tools/servers/customer_faults_freeform.py) or roleplay (a second blind set, mainly agent acts, for the final "
        "measurement: tools/servers/customer_faults_roleplay.py) or slips (a third blind set, only agent acts: "
        "tools/servers/customer_faults_slips.py) (default: %(default)s)",
    )
    p.add_argument("--re-review", action="store_true", help="--rescore with the current speaks_as_agent check")
    p.add_argument(
        "--faults",
        default=None,
        help=f"the serve-user --faults spec of every held-out run (default: {FAULTS}, telecom {FAULTS_TELECOM}); "
        "e.g. as_agent:0.6 for a set that plays only agent acts",
    )
    ns = p.parse_args()
    os.environ.setdefault("TAU_FAULTS_SEED", "7")
    out, subset = Path(ns.out), ["--tasks", ns.tasks] if ns.tasks else []
    clean_lines = [
        "| set | tasks | scripted: flagged | serve-user: flagged | held-out: episodes, reviewed, "
        "with a fault (flagged), flagged without one |",
        "|---|---:|---:|---:|---:|",
    ]
    all_rows: list[dict] = []
    all_found: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    injected: Counter[str] = Counter()
    for benchmark, domain in SETS:
        name = f"{benchmark}_{domain}"
        if ns.rescore or ns.re_review:
            runs = (saved(out / f"{name}_{run}") for run in ("scripted", "served", "heldout"))
            scripted, served, faulty = (re_review(rows) if ns.re_review else rows for rows in runs)
            log = json.loads((out / f"{name}_heldout" / "faults_log.json").read_text())
            kept = out / f"{name}_heldout" / "faults_set.txt"
            ns.faults_set = kept.read_text().strip() if kept.exists() else "paraphrased"
        else:
            scripted = rollout(out / f"{name}_scripted", benchmark, domain, *subset)
            served, _ = serve(out / f"{name}_served", benchmark, domain, subset, None)
            spec = ns.faults or (FAULTS_TELECOM if domain == "telecom" else FAULTS)
            faulty, log = serve(out / f"{name}_heldout", benchmark, domain, subset, spec, ns.faults_set)
        injected.update(e["kind"] for e in log)
        clean = {task_of(r): r for r in served}
        found = truth(faulty, log, clean)
        faulted = [i for i in range(len(faulty)) if any(found[i].get(k) for k in EXPECTED)]
        false = sum(bool(findings(r)) for i, r in enumerate(faulty) if i not in faulted)
        reviewed = sum(bool(r["metadata"].get("tau_review")) for r in faulty)
        clean_lines.append(
            f"| {benchmark}/{domain} test | {len(scripted)} | {flags(scripted)} | {flags(served)} | "
            f"{len(faulty)}, {reviewed}, {len(faulted)} ({sum(bool(findings(faulty[i])) for i in faulted)}), {false} |"
        )
        for i, kinds in found.items():
            all_found[len(all_rows) + i] = kinds
        all_rows += faulty
        print(f"done {benchmark}/{domain}", file=sys.stderr)
    print("\n".join(clean_lines))
    print()
    print("\n".join(tables(all_rows, all_found)))
    print()
    matched = Counter(e["kind"] for kinds in all_found.values() for entries in kinds.values() for e in entries)
    print(f"faults set: {ns.faults_set}")
    print(f"held-out faults the servers injected (GET /faults/log): {dict(injected)}")
    print(f"log entries matched to an episode: {dict(matched)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
