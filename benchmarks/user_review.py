"""The customer review's checks against injected customer faults, and its flag rate on clean runs (issue 33).

For each τ² domain and τ-bench v1 domain (their test splits, the built-in oracle policy):

1. clean, ``tau_user=scripted`` (the stand-in that opens with its whole scenario);
2. clean, ``tau_user=llm`` on ``slime-tau serve-user --max-replies 2`` without faults (the same stand-in through the
   LLM user path, answering twice more before it stops);
3. faulty: ``serve-user --faults`` with the wrong-customer kinds (``invented_id``, ``pasted_instructions``,
   ``as_agent``, ``loop``, ``early_stop``) at :data:`FAULTS`, seeded.

Ground truth is read from each episode's messages: every injected fault leaves its marker
(``tools/servers/customer_faults.py``). A check's recall is over the reviewed episodes that carry its fault, its
precision over the episodes it flagged. ``early_stop`` leaves no message (a stop is not a message) and no
deterministic check claims it: it is counted from the server's ``GET /faults`` and left to the judge rubric.
Prints the markdown tables of benchmarks/user_review.md.

    PYTHONPATH=$PWD python benchmarks/user_review.py [--out runs/user_review]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.tools.servers.customer_faults import AS_AGENT_LINE, LOOP_LINE

SETS = (("tau2", "retail"), ("tau2", "airline"), ("tau2", "telecom"), ("tau1", "retail"), ("tau1", "airline"))
FAULTS = "invented_id:0.2,as_agent:0.2,pasted_instructions:0.25,loop:0.25,early_stop:0.1"
MARKERS = {
    "invented_identifier": lambda text: "Also, for your records, my" in text,
    "speaks_as_agent": lambda text: AS_AGENT_LINE in text,
    "pasted_instructions": lambda text: text.startswith("To be clear, here is everything:"),
}
"""A check -> whether one customer message carries the fault it is meant to catch."""
REPEAT_LIMIT = 3
MAX_REPLIES = 2
"""serve-user's "go ahead" answers before it stops: turns after the opening where a fault can show."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rollout(out: Path, benchmark: str, domain: str, *extra: str) -> list[dict[str, Any]]:
    cmd = ["slime-tau", "rollout", "--benchmark", benchmark, "--domain", domain, "--split", "test"]
    cmd += ["--max-turns", "15", "--concurrency", "4", "--out", str(out), "--overwrite", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]


@contextlib.contextmanager
def user_server(*flags: str) -> Iterator[str]:
    """``slime-tau serve-user --max-replies 2 FLAGS`` on a free port, up and answering; yields its base URL."""
    port = free_port()
    cmd = ["slime-tau", "serve-user", "--port", str(port), "--max-replies", str(MAX_REPLIES), *flags]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # a loaded box starts it slowly
        while True:
            try:
                urllib.request.urlopen(base + "/v1/models", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit(f"{' '.join(cmd)} did not come up")
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(10)


def llm_user_flags(base: str) -> list[str]:
    """The rollout flags that play the customer on ``base``; its errors are FAILED (user_error) on purpose here."""
    return [
        "--user",
        "llm",
        "--user-base-url",
        base + "/v1",
        "--user-model",
        "scripted-user",
        "--max-failed-share",
        "1",
    ]


def with_user_server(out: Path, benchmark: str, domain: str, faults: str | None) -> tuple[list[dict], dict]:
    with user_server(*(["--faults", faults] if faults else [])) as base:
        rows = rollout(out, benchmark, domain, *llm_user_flags(base))
        counts = json.loads(urllib.request.urlopen(base + "/faults", timeout=5).read()) if faults else {}
    return rows, counts


def customer_texts(row: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in row["metadata"].get("messages", [])[1:] if m.get("role") == "user"]


def truth(row: dict[str, Any]) -> set[str]:
    """The checks this episode's injected faults are meant to trip."""
    texts = customer_texts(row)
    found = {check for check, has in MARKERS.items() if any(has(t) for t in texts)}
    run = best = 0
    for text in texts:
        run = run + 1 if text == LOOP_LINE else 0
        best = max(best, run)
    if best > REPEAT_LIMIT:
        found.add("repeated_message")
    return found


def flagged(row: dict[str, Any]) -> set[str]:
    review = row["metadata"].get("tau_review") or {}
    return {f["check"] for f in review.get("findings") or []}


def table(rows: list[dict[str, Any]]) -> list[str]:
    reviewed = [r for r in rows if r["metadata"].get("tau_review")]
    lines = [
        "| check | injected (reviewed episodes) | caught | recall | flagged | precision |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for check in (*MARKERS, "repeated_message"):
        injected = [r for r in reviewed if check in truth(r)]
        hit = [r for r in reviewed if check in flagged(r)]
        tp = sum(check in flagged(r) for r in injected)
        recall = f"{tp / len(injected):.3f}" if injected else "n/a"
        precision = f"{sum(check in truth(r) for r in hit) / len(hit):.3f}" if hit else "n/a"
        lines.append(f"| {check} | {len(injected)} | {tp} | {recall} | {len(hit)} | {precision} |")
    return lines


def review_cost(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Mean µs of the deterministic checks per episode, and that as a share of the mean episode wall time."""
    inputs = [
        ReviewInput(customer_texts(r)[0] if customer_texts(r) else "", tuple(r["metadata"]["messages"]), 1.0, 1)
        for r in rows
        if r["metadata"].get("messages")
    ]
    t0 = time.perf_counter()
    for _ in range(5):
        for review in inputs:
            run_checks(review)
    per = (time.perf_counter() - t0) / (5 * max(len(inputs), 1))
    wall = mean(float(r["metadata"].get("episode_wall_s") or 0.0) for r in rows) or float("nan")
    return per * 1e6, per / wall


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/user_review")
    ns = p.parse_args()
    os.environ.setdefault("TAU_FAULTS_SEED", "7")
    out = Path(ns.out)
    clean_lines = ["| set | tasks | scripted: flagged | serve-user: flagged | faulty: episodes, reviewed, user_error |"]
    clean_lines.append("|---|---:|---:|---:|---:|")
    faulty_all: list[dict[str, Any]] = []
    injected: Counter[str] = Counter()
    for benchmark, domain in SETS:
        name = f"{benchmark}_{domain}"
        scripted = rollout(out / f"{name}_scripted", benchmark, domain)
        served, _ = with_user_server(out / f"{name}_served", benchmark, domain, None)
        faulty, counts = with_user_server(out / f"{name}_faulty", benchmark, domain, FAULTS)
        injected.update(counts.get("injected", {}))
        faulty_all += faulty
        reviewed = sum(bool(r["metadata"].get("tau_review")) for r in faulty)
        excluded = sum(r["metadata"].get("failed_endpoint") == "customer" for r in faulty)
        clean_lines.append(
            f"| {benchmark}/{domain} test | {len(scripted)} | {sum(bool(flagged(r)) for r in scripted)} | "
            f"{sum(bool(flagged(r)) for r in served)} | {len(faulty)}, {reviewed}, {excluded} |"
        )
        print(f"done {benchmark}/{domain}", file=sys.stderr)
    us, share = review_cost(faulty_all)
    print("\n".join(clean_lines))
    print()
    print("\n".join(table(faulty_all)))
    print()
    print(f"faults the servers injected: {dict(injected)} (early_stop: judge rubric only)")
    print(f"deterministic checks: {us:.0f} µs per episode, {share:.2e} of the mean episode's wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
