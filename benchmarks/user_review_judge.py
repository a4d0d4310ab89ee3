"""τ²'s user-review rubric on a judge endpoint, measured: recall and precision per customer-fault kind, and what
each judged episode costs (issue 40 §4).

For each set (default τ² retail test; ``--sets`` takes ``benchmark/domain`` pairs), ``slime-tau rollout`` plays
every task with the built-in oracle policy against ``slime-tau serve-user --faults`` (the faults of
``user_review.py``: ``invented_id``, ``as_agent``, ``pasted_instructions``, ``loop``, ``early_stop``, seeded) and
``--review-judge-share 1`` on ``--judge-url``/``--judge-model``: every reviewed episode is also judged with τ²'s
user-only rubric (``engine/users/review_judge.py``), the customer's stop included.

Ground truth is each customer message's injected fault, read from its marker (``customer_faults.py``; the stop from
the verdict's ``stop``). The judge *catches* a fault in an episode when one of its findings points at a message
that carries it (``turn_idx``); its recall per kind is over the judged episodes that carry the kind. Its precision
is per τ² tag: of the judge's findings with that tag, those that point at a message whose fault the tag stands for
(:data:`TAG_OF`); overall, those that point at any faulty message. Clean episodes (no fault injected) the judge
flagged are counted apart. Cost per judged episode: the judge's requests, prompt and completion tokens (the
endpoint's ``usage``) and wall seconds awaited, from each episode's ``tau_user_cost.judge``.

``--stand-in`` starts our stand-in judge instead (in this process, over HTTP): it flags exactly the injected
markers, so its recall and precision are 1.0 by construction and prove only the harness (ground truth, indices,
parsing, counting); its ``usage`` counts real tokens of τ²'s rubric prompt with a real tokenizer (``--tokenizer``,
default Qwen2.5's, the vocabulary Qwen3 shares), and its completion is its short JSON, not a model's reasoning.

    PYTHONPATH=$PWD python benchmarks/user_review_judge.py --judge-url http://127.0.0.1:30000/v1 \
        --judge-model Qwen/Qwen3-8B
    PYTHONPATH=$PWD python benchmarks/user_review_judge.py --stand-in
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

from slime_tau_plugin.tools.servers.customer_faults import AS_AGENT_LINE, EARLY_STOP_LINE, LOOP_LINE  # noqa: E402

KINDS = ("invented_id", "as_agent", "pasted_instructions", "loop", "early_stop")
TAG_OF = {
    "hallucination": ("invented_id",),
    "guideline_violation": ("as_agent", "pasted_instructions", "loop"),
    "revealed_info_early": ("pasted_instructions",),
    "premature_termination": ("early_stop",),
    "inconsistent_behavior": ("loop",),
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


def message_kinds(text: str) -> set[str]:
    """The injected faults one customer message carries (its markers)."""
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


def faults_of(row: dict[str, Any]) -> dict[int, set[str]]:
    """Message index -> injected kinds, the stop (``len(messages)``) included."""
    meta = row["metadata"]
    messages = meta.get("messages") or []
    out = {
        i: message_kinds(str(m.get("content") or "")) for i, m in enumerate(messages) if i and m.get("role") == "user"
    }
    stop = (meta.get("tau_review") or {}).get("stop")
    if stop:
        out[len(messages)] = message_kinds(str(stop))
    return {i: kinds for i, kinds in out.items() if kinds}


def judge_findings(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in (row["metadata"].get("tau_review") or {}).get("findings") or [] if f.get("check") == "judge"]


def quality(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, float]]:
    """The recall/precision table over judged episodes, and headline numbers."""
    judged = [r for r in rows if (r["metadata"].get("tau_review") or {}).get("judged")]
    lines = ["| fault kind | judged episodes with it | caught | recall |", "|---|---:|---:|---:|"]
    for kind in KINDS:
        having = [r for r in judged if any(kind in ks for ks in faults_of(r).values())]
        caught = sum(any(kind in faults_of(r).get(f["message_index"], ()) for f in judge_findings(r)) for r in having)
        recall = f"{caught / len(having):.3f}" if having else "n/a"
        lines.append(f"| {kind} | {len(having)} | {caught} | {recall} |")
    lines += ["", "| τ² tag | judge findings | at a fault it names | precision |", "|---|---:|---:|---:|"]
    for tag, kinds in TAG_OF.items():
        hits = [(r, f) for r in judged for f in judge_findings(r) if tag in f.get("tags", ())]
        right = sum(bool(set(kinds) & faults_of(r).get(f["message_index"], set())) for r, f in hits)
        precision = f"{right / len(hits):.3f}" if hits else "n/a"
        lines.append(f"| {tag} | {len(hits)} | {right} | {precision} |")
    every = [(r, f) for r in judged for f in judge_findings(r)]
    at_fault = sum(f["message_index"] in faults_of(r) for r, f in every)
    clean = [r for r in judged if not faults_of(r)]
    numbers = {
        "judged": len(judged),
        "judge_failed": sum(bool((r["metadata"].get("tau_review") or {}).get("judge_error")) for r in rows),
        "findings": len(every),
        "position_precision": at_fault / len(every) if every else float("nan"),
        "clean_episodes": len(clean),
        "clean_flagged": sum(bool(judge_findings(r)) for r in clean),
    }
    return lines, numbers


def cost(rows: list[dict[str, Any]]) -> list[str]:
    """Per judged episode: the judge's requests, tokens and wait (mean, median, max), the customer's beside it."""
    judged = [r for r in rows if (r["metadata"].get("tau_review") or {}).get("judged")]
    parts = [(r["metadata"].get("tau_user_cost") or {}) for r in judged]
    lines = ["| per judged episode | mean | median | max | the customer's own (mean) |", "|---|---:|---:|---:|---:|"]
    for name, key in (
        ("requests", "requests"),
        ("prompt tokens", "prompt_tokens"),
        ("completion tokens", "completion_tokens"),
        ("wall seconds awaited", "wait_s"),
    ):
        values = [float((p.get("judge") or {}).get(key) or 0.0) for p in parts] or [0.0]
        own = mean(float((p.get("user") or {}).get(key) or 0.0) for p in parts) if parts else 0.0
        fmt = "{:.3f}" if key == "wait_s" else "{:.0f}" if key != "requests" else "{:.2f}"
        cells = [fmt.format(v) for v in (mean(values), median(values), max(values), own)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def run_set(out: Path, benchmark: str, domain: str, judge_url: str, judge_model: str) -> tuple[list[dict], dict]:
    """One set through serve-user with faults and the judge on every episode; (rows, the server's fault counts)."""
    with user_review.user_server("--faults", user_review.FAULTS) as base:
        extra = [*user_review.llm_user_flags(base), "--review-judge-share", "1"]
        extra += ["--judge-base-url", judge_url, "--judge-model", judge_model, "--judge-timeout-s", "300"]
        rows = user_review.rollout(out, benchmark, domain, *extra)
        counts = json.loads(urllib.request.urlopen(base + "/faults", timeout=5).read())
    return rows, counts


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
    p.add_argument("--out", default="runs/user_review_judge")
    ns = p.parse_args()
    if bool(ns.stand_in) == bool(ns.judge_url):
        p.error("give --judge-url (a real judge) or --stand-in, not both")
    os.environ.setdefault("TAU_FAULTS_SEED", "7")
    judge = stand_in_judge(ns.tokenizer) if ns.stand_in else None
    url = judge.base_url if judge is not None else ns.judge_url
    rows: list[dict] = []
    injected: Counter[str] = Counter()
    t0 = time.monotonic()
    try:
        for item in ns.sets.split(","):
            benchmark, domain = item.strip().split("/")
            got, counts = run_set(Path(ns.out) / f"{benchmark}_{domain}", benchmark, domain, url, ns.judge_model)
            rows += got
            injected.update(counts.get("injected", {}))
            print(f"done {benchmark}/{domain}: {len(got)} episodes", file=sys.stderr)
    finally:
        if judge is not None:
            judge.stop()
    table, numbers = quality(rows)
    print(
        f"judge: {'stand-in (markers)' if ns.stand_in else ns.judge_model} at {url}; sets {ns.sets}; "
        f"{len(rows)} episodes in {time.monotonic() - t0:.0f} s; faults injected {dict(injected)}"
    )
    print("\n".join(table))
    print()
    print(
        f"judged {numbers['judged']}, judge failed {numbers['judge_failed']}; {numbers['findings']} judge findings, "
        f"{numbers['position_precision']:.3f} of them at an injected fault; clean episodes "
        f"{numbers['clean_episodes']}, flagged by the judge {numbers['clean_flagged']}"
    )
    print()
    print("\n".join(cost(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
