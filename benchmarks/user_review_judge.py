"""τ²'s user-review rubric on a judge endpoint, measured: recall and precision per customer-fault kind, how many of
the judge's replies parse as τ²'s rubric JSON, and what each judged episode costs (issue 40 §4).

For each set (default τ² retail test; ``--sets`` takes ``benchmark/domain`` pairs, ``--tasks`` a subset),
``slime-tau rollout`` plays every task with the built-in oracle policy against ``slime-tau serve-user --faults``
and ``--review-judge-share 1`` on ``--judge-url``/``--judge-model``: every reviewed episode is also judged with
τ²'s user-only rubric (``engine/users/review_judge.py``), the customer's stop included. ``--faults-set``:

- ``templated`` (default): the faults of ``user_review.py`` (``invented_id``, ``as_agent``,
  ``pasted_instructions``, ``loop``, ``early_stop``, seeded), ground truth read from each message's marker
  (``customer_faults.py``; the stop from the verdict's ``stop``);
- ``paraphrased``: the held-out generator of ``user_review_heldout.py`` (invented facts of ten shapes, agent acts
  never naming the agent, stops), ground truth from the server's log; a stop is a ``premature_stop`` by that
  benchmark's rule, read against a clean run of the same tasks (played first, without the judge).

The judge *catches* a fault when one of its findings points at the message that carries it (``turn_idx``; a stop
is message ``len(messages)``); recall per kind is over the judged episodes that carry it. Precision per τ² tag: of
the judge's findings with that tag, those at a message whose fault the tag names (:data:`TAG_OF`); overall, those
at any faulty message. The deterministic checks are scored the same way on the same episodes, beside the judge.
A reply that is not τ²'s JSON (or names a message that is not the customer's, or a severity τ² lacks) is a judge
failure (``judge_error``), never a clean verdict: the parse rate is judged / (judged + such failures). Cost per
episode the judge was asked: its requests, prompt and completion tokens (the endpoint's ``usage``) and seconds
awaited (queueing included), from ``tau_user_cost.judge``; and, where the endpoint is ``judge_model_server.py``,
its seconds of model time per request (``GET /stats``).

``--stand-in`` starts our stand-in judge instead (in this process, over HTTP): it flags exactly the injected
templated markers, so its recall and precision are 1.0 by construction and prove only the harness; its ``usage``
counts real tokens of τ²'s rubric prompt with a real tokenizer (``--tokenizer``, default Qwen2.5's).

    PYTHONPATH=$PWD python benchmarks/user_review_judge.py --judge-url http://127.0.0.1:30000/v1 \
        --judge-model Qwen/Qwen3-8B [--faults-set paraphrased] [--sets tau2/retail,tau2/airline]
    PYTHONPATH=$PWD python benchmarks/user_review_judge.py --stand-in
    PYTHONPATH=$PWD python benchmarks/user_review_judge.py --rescore --out runs/user_review_judge ...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from statistics import mean, median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import user_review  # noqa: E402  (benchmarks/ is not a package)
import user_review_heldout as heldout  # noqa: E402

from slime_tau_plugin.tools.servers.customer_faults import AS_AGENT_LINE, EARLY_STOP_LINE, LOOP_LINE  # noqa: E402

KINDS = {
    "templated": ("invented_id", "as_agent", "pasted_instructions", "loop", "early_stop"),
    "paraphrased": ("invented_fact", "agent_act", "premature_stop"),
}
TAG_OF = {
    "templated": {
        "hallucination": ("invented_id",),
        "guideline_violation": ("as_agent", "pasted_instructions", "loop"),
        "revealed_info_early": ("pasted_instructions",),
        "premature_termination": ("early_stop",),
        "inconsistent_behavior": ("loop",),
    },
    "paraphrased": {
        "hallucination": ("invented_fact",),
        "guideline_violation": ("agent_act",),
        "premature_termination": ("premature_stop",),
        "missed_required_action": ("premature_stop",),
    },
}
"""τ²'s tag -> the injected kinds it is the right name for (a finding with another tag is judged by position only)."""
STAND_IN_TAG = {
    "invented_id": "hallucination",
    "as_agent": "guideline_violation",
    "pasted_instructions": "revealed_info_early",
    "loop": "guideline_violation",
    "early_stop": "premature_termination",
}
_TURN = re.compile(r"^\[(\d+)\] (User|Agent): ", re.M)
"""Where each message of the judge's conversation starts (``review_judge.conversation_text``); a message may run
over several lines."""
Truth = dict[int, set[str]]
"""Message index (a stop: ``len(messages)``) -> the injected kinds it carries."""


def message_kinds(text: str) -> set[str]:
    """The injected templated faults one customer message carries (its markers)."""
    found = set()
    if "Also, for your records, my" in text:
        found.add("invented_id")
    if AS_AGENT_LINE in text:
        found.add("as_agent")
    if text.startswith("To be clear, here is everything:"):
        found.add("pasted_instructions")
    if text == LOOP_LINE:
        found.add("loop")
    if EARLY_STOP_LINE in text:
        found.add("early_stop")
    return found


def customer_messages(conversation: str) -> list[tuple[int, str]]:
    """The customer's messages in the judge's conversation text: (index, text)."""
    starts = list(_TURN.finditer(conversation))
    out = []
    for k, found in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(conversation)
        if found.group(2) == "User":
            out.append((int(found.group(1)), conversation[found.end() : end].rstrip("\n")))
    return out


def faults_of(row: dict[str, Any]) -> Truth:
    """Templated ground truth: message index -> injected kinds, the stop (``len(messages)``) included."""
    meta = row["metadata"]
    messages = meta.get("messages") or []
    out = {
        i: message_kinds(str(m.get("content") or "")) for i, m in enumerate(messages) if i and m.get("role") == "user"
    }
    stop = (meta.get("tau_review") or {}).get("stop")
    if stop:
        out[len(messages)] = message_kinds(str(stop))
    return {i: kinds for i, kinds in out.items() if kinds}


def paraphrased_truth(rows: list[dict], log: list[dict], clean: list[dict]) -> list[Truth]:
    """Held-out ground truth per row from the server's log (``user_review_heldout.truth``); a stop that was not
    premature (``stop_after_done``) is no fault."""
    found = heldout.truth(rows, log, {heldout.task_of(r): r for r in clean})
    out: list[Truth] = []
    for i, row in enumerate(rows):
        truth: Truth = {}
        for kind, entries in found.get(i, {}).items():
            if kind not in KINDS["paraphrased"]:
                continue
            for entry in entries:
                at = entry.get("index", len(row["metadata"].get("messages") or []))
                truth.setdefault(at, set()).add(kind)
        out.append(truth)
    return out


def review(row: dict[str, Any]) -> dict[str, Any]:
    return row["metadata"].get("tau_review") or {}


def judge_findings(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in review(row).get("findings") or [] if f.get("check") == "judge"]


def check_findings(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in review(row).get("findings") or [] if f.get("check") != "judge"]


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def quality(rows: list[dict], truths: list[Truth], faults_set: str) -> tuple[list[str], dict[str, Any]]:
    """The recall/precision tables (the judge beside the deterministic checks), headlines. Recall is over the
    episodes the judge was asked about: a reply that failed to parse caught nothing."""
    pairs = list(zip(rows, truths, strict=True))
    asked = [(r, t) for r, t in pairs if review(r).get("judged") or review(r).get("judge_error")]
    judged = [(r, t) for r, t in asked if review(r).get("judged")]
    lines = [
        "| fault kind | episodes with it (judge asked) | judged | judge caught | judge recall | checks caught | "
        "checks recall |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in KINDS[faults_set]:
        having = [(r, t) for r, t in asked if any(kind in ks for ks in t.values())]
        parsed = sum(bool(review(r).get("judged")) for r, _ in having)
        by_judge = sum(any(kind in t.get(f["message_index"], ()) for f in judge_findings(r)) for r, t in having)
        by_checks = sum(any(kind in t.get(f["message_index"], ()) for f in check_findings(r)) for r, t in having)
        lines.append(
            f"| {kind} | {len(having)} | {parsed} | {by_judge} | {_ratio(by_judge, len(having))} | {by_checks} | "
            f"{_ratio(by_checks, len(having))} |"
        )
    lines += ["", "| τ² tag | judge findings | at a fault it names | precision |", "|---|---:|---:|---:|"]
    for tag, kinds in TAG_OF[faults_set].items():
        hits = [(t, f) for r, t in judged for f in judge_findings(r) if tag in f.get("tags", ())]
        right = sum(bool(set(kinds) & t.get(f["message_index"], set())) for t, f in hits)
        lines.append(f"| {tag} | {len(hits)} | {right} | {_ratio(right, len(hits))} |")
    other = Counter(
        tag for r, _ in judged for f in judge_findings(r) for tag in f.get("tags", ()) if tag not in TAG_OF[faults_set]
    )
    every = [(t, f) for r, t in judged for f in judge_findings(r)]
    checks = [(t, f) for r, t in asked for f in check_findings(r)]
    clean = [r for r, t in asked if not t]
    failures = Counter(failure_kind(str(review(r).get("judge_error"))) for r in rows if review(r).get("judge_error"))
    unparsed = sum(n for why, n in failures.items() if why != "timeout or transport")
    numbers = {
        "episodes": len(rows),
        "asked": len(asked),
        "judged": len(judged),
        "failures": dict(failures),
        "parse_rate": _ratio(len(judged), len(judged) + unparsed),
        "findings": len(every),
        "position_precision": _ratio(sum(f["message_index"] in t for t, f in every), len(every)),
        "check_findings": len(checks),
        "check_precision": _ratio(sum(f["message_index"] in t for t, f in checks), len(checks)),
        "clean_episodes": len(clean),
        "clean_flagged": sum(bool(judge_findings(r)) for r in clean),
        "other_tags": dict(other),
    }
    return lines, numbers


def failure_kind(error: str) -> str:
    """Why the judge failed, from the verdict's ``judge_error``."""
    if "not τ²'s review JSON" in error or error.startswith("JSONDecodeError"):
        return "not the rubric's JSON"
    if "turn_idx" in error:
        return "turn_idx not a customer message"
    if "severity" in error:
        return "severity not one of τ²'s"
    return "timeout or transport"


def cost(rows: list[dict[str, Any]], served: list[dict[str, Any]]) -> list[str]:
    """Per episode the judge was asked: requests, tokens, wait (mean, median, max), the customer's beside it; the
    model's own seconds per request where the endpoint reports them."""
    asked = [r for r in rows if review(r).get("judged") or review(r).get("judge_error")]
    parts = [(r["metadata"].get("tau_user_cost") or {}) for r in asked]
    lines = [
        "| per episode the judge was asked | mean | median | max | the customer's own (mean) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, key in (
        ("requests", "requests"),
        ("prompt tokens", "prompt_tokens"),
        ("completion tokens", "completion_tokens"),
        ("wall seconds awaited (queue included)", "wait_s"),
    ):
        values = [float((p.get("judge") or {}).get(key) or 0.0) for p in parts] or [0.0]
        own = mean(float((p.get("user") or {}).get(key) or 0.0) for p in parts) if parts else 0.0
        fmt = "{:.1f}" if key == "wait_s" else "{:.0f}" if key != "requests" else "{:.2f}"
        cells = [fmt.format(v) for v in (mean(values), median(values), max(values), own)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if served:
        secs = [float(s["seconds"]) for s in served]
        cut = sum(s.get("finish_reason") == "length" for s in served)
        lines.append(
            f"| model seconds per request (server) | {mean(secs):.1f} | {median(secs):.1f} | {max(secs):.1f} | - |"
        )
        lines.append(f"| replies cut at the token cap | {cut} of {len(served)} | | | |")
    return lines


def judge_flags(url: str, model: str) -> list[str]:
    return ["--review-judge-share", "1", "--judge-base-url", url, "--judge-model", model, "--judge-timeout-s", "600"]


def run_set(out: Path, benchmark: str, domain: str, url: str, model: str, faults_set: str, tasks: list[str]) -> None:
    """One set through serve-user with faults and the judge on every episode (the clean run first, for
    ``paraphrased``); what it played is left in ``out`` for :func:`scored`."""
    if faults_set == "templated":
        with user_review.user_server("--faults", user_review.FAULTS) as base:
            user_review.rollout(
                out, benchmark, domain, *user_review.llm_user_flags(base), *judge_flags(url, model), *tasks
            )
        return
    with user_review.user_server() as base:
        user_review.rollout(out / "clean", benchmark, domain, *user_review.llm_user_flags(base), *tasks)
    spec = heldout.FAULTS_TELECOM if domain == "telecom" else heldout.FAULTS
    with user_review.user_server("--faults", spec, "--faults-set", "paraphrased") as base:
        user_review.rollout(out, benchmark, domain, *user_review.llm_user_flags(base), *judge_flags(url, model), *tasks)
        log = json.loads(urllib.request.urlopen(base + "/faults/log", timeout=5).read())["injected"]
    (out / "faults_log.json").write_text(json.dumps(log))


def scored(out: Path, faults_set: str) -> tuple[list[dict], list[Truth]]:
    """The rows a set played and their ground truth."""
    rows = heldout.saved(out)
    if faults_set == "templated":
        return rows, [faults_of(r) for r in rows]
    log = json.loads((out / "faults_log.json").read_text())
    return rows, paraphrased_truth(rows, log, heldout.saved(out / "clean"))


def server_stats(url: str) -> list[dict[str, Any]]:
    """``judge_model_server.py``'s per-request costs; empty for an endpoint without ``GET /stats``."""
    try:
        return json.loads(urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/stats", timeout=5).read())["requests"]
    except (OSError, ValueError, KeyError):
        return []


def stand_in_judge(tokenizer_dir: str | None) -> Any:
    """Our stand-in judge: flags exactly the injected markers, counts real tokens (see the module docstring)."""
    from slime_tau_plugin.engine.chat.templates import load_tokenizer
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    path = tokenizer_dir or str(Path(__file__).resolve().parents[1] / ".cache" / "tokenizers" / "qwen2_5")
    tok = load_tokenizer(path)

    def answer(messages: list[dict], tools: list[dict] | None) -> dict:
        errors = []
        for index, text in customer_messages(str(messages[-1].get("content") or "")):
            for kind in sorted(message_kinds(text)):
                error = {"turn_idx": index, "error_tags": [STAND_IN_TAG[kind]], "severity": "minor"}
                error |= {"reasoning": f"injected {kind}", "user_message": text[:80], "correct_behavior": "-"}
                errors.append(error)
        return {"role": "assistant", "content": json.dumps({"errors": errors, "summary": f"{len(errors)} errors"})}

    class CountingJudge(ChatUserServer):
        async def complete(self, body: Any, headers: dict[str, str]) -> Any:
            status, reply = await super().complete(body, headers)
            if status == 200:
                text = tok.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=False)
                prompt = tok.encode(text, add_special_tokens=False)
                said = tok.encode(str(reply["choices"][0]["message"].get("content") or ""), add_special_tokens=False)
                reply["usage"] = {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": len(said),
                    "total_tokens": len(prompt) + len(said),
                }
            return status, reply

    return CountingJudge(reply=answer).start()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--judge-url", help="the judge's OpenAI-compatible base URL, e.g. http://127.0.0.1:30000/v1")
    p.add_argument("--judge-model", default="judge", help="the served model's name")
    p.add_argument("--stand-in", action="store_true", help="run our stand-in judge (proves the harness only)")
    p.add_argument("--tokenizer", default=None, help="the stand-in's tokenizer for its usage counts")
    p.add_argument("--sets", default="tau2/retail", help="comma-separated benchmark/domain (test splits)")
    p.add_argument("--faults-set", choices=tuple(KINDS), default="templated", help="serve-user's fault generator")
    p.add_argument("--tasks", default=None, help="positions in each test split, e.g. 0-19 (default: all)")
    p.add_argument("--rescore", action="store_true", help="score the runs already in --out; play nothing")
    p.add_argument("--out", default="runs/user_review_judge")
    ns = p.parse_args()
    if not ns.rescore and bool(ns.stand_in) == bool(ns.judge_url):
        p.error("give --judge-url (a real judge) or --stand-in, not both")
    if ns.stand_in and ns.faults_set != "templated":
        p.error("--stand-in knows the templated markers only: use --faults-set templated")
    os.environ.setdefault("TAU_FAULTS_SEED", "7")
    out = Path(ns.out)
    judge = stand_in_judge(ns.tokenizer) if ns.stand_in and not ns.rescore else None
    url = judge.base_url if judge is not None else (ns.judge_url or "")
    rows: list[dict] = []
    truths: list[Truth] = []
    before = 0 if ns.rescore else len(server_stats(url))  # a server kept up across runs: only this run's requests
    t0 = time.monotonic()
    try:
        for item in ns.sets.split(","):
            benchmark, domain = item.strip().split("/")
            where = out / f"{benchmark}_{domain}"
            if not ns.rescore:
                tasks = ["--tasks", ns.tasks] if ns.tasks else []
                run_set(where, benchmark, domain, url, ns.judge_model, ns.faults_set, tasks)
            got, truth = scored(where, ns.faults_set)
            rows, truths = rows + got, truths + truth
            print(f"done {benchmark}/{domain}: {len(got)} episodes", file=sys.stderr)
    finally:
        if judge is not None:
            judge.stop()
    served = [] if ns.rescore else server_stats(url)[before:]
    if served:
        (out / "server_stats.json").write_text(json.dumps(served))
    elif (out / "server_stats.json").exists():
        served = json.loads((out / "server_stats.json").read_text())
    table, numbers = quality(rows, truths, ns.faults_set)
    injected = Counter(k for t in truths for ks in t.values() for k in ks)
    print(
        f"judge: {'stand-in (markers)' if ns.stand_in else ns.judge_model} at {url or '(rescored)'}; sets {ns.sets}; "
        f"faults {ns.faults_set}; {len(rows)} episodes in {time.monotonic() - t0:.0f} s; "
        f"faulty messages by kind {dict(injected)}"
    )
    print("\n".join(table))
    print()
    print(
        f"judge asked on {numbers['asked']} of {numbers['episodes']} episodes, judged {numbers['judged']}; "
        f"failures {numbers['failures']}; parse rate "
        f"{numbers['parse_rate']}; {numbers['findings']} judge findings, {numbers['position_precision']} of them at "
        f"an injected fault (other tags {numbers['other_tags']}); the checks: {numbers['check_findings']} findings, "
        f"{numbers['check_precision']} at an injected fault; clean episodes (judge asked) {numbers['clean_episodes']}, "
        f"flagged by the judge {numbers['clean_flagged']}"
    )
    print()
    print("\n".join(cost(rows, served)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
