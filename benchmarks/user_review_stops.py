"""The ``premature_stop`` check against a customer that stops early, per τ domain (issue 40 §3).

For each τ² domain and τ-bench v1 domain (test splits, the built-in oracle policy), ``slime-tau rollout`` against
``slime-tau serve-user --faults early_stop:RATE`` (seeded): a drawn customer reply after the opening is replaced by
``customer_faults.EARLY_STOP_LINE`` (``###STOP###``). Ground truth, read without the check: the customer's stop is
that line (the verdict's ``stop``) and the agent's tool messages (``metadata["messages"]``, each names its tool)
hold fewer calls of a required write than the task's reference (``EnvSession.required_writes``, τ's own
classification), or τ's message log (``metadata["tau_messages"]``) fewer of the customer's own device fixes than
the task requires (``EnvSession.required_user_writes``: τ² telecom).
Recall over those episodes, precision over the episodes the check flagged. A clean run of each
set (``tau_user: scripted``, and ``serve-user`` without faults) gives the flags where nothing was injected (goal 0).

    PYTHONPATH=$PWD python benchmarks/user_review_stops.py [--rate 0.5] [--out runs/user_review_stops]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import user_review  # noqa: E402  (benchmarks/ is not a package)

from slime_tau_plugin.engine.envs import get_backend  # noqa: E402
from slime_tau_plugin.tools.servers.customer_faults import EARLY_STOP_LINE  # noqa: E402


def required(benchmark: str, domain: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Task id -> (the agent's required writes, the customer's own)."""
    backend = get_backend(benchmark)
    sessions = {ref.task_id: backend.open(ref) for ref in backend.task_refs(domain, "test")}
    return {task: (s.required_writes(), s.required_user_writes()) for task, s in sessions.items()}


def premature(row: dict[str, Any], writes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> bool:
    """The injected stop came before a required write (independent of the check's own reading)."""
    meta = row["metadata"]
    if EARLY_STOP_LINE not in str((meta.get("tau_review") or {}).get("stop") or ""):
        return False
    agent, own = writes.get(str(meta.get("task_id")), ((), ()))
    done = Counter(str(m.get("name")) for m in meta.get("messages") or [] if m.get("role") == "tool")
    acted = Counter(
        str(call.get("name"))
        for m in meta.get("tau_messages") or []
        if m.get("role") == "user"
        for call in m.get("tool_calls") or []
    )
    return bool(Counter(agent) - done) or bool(Counter(own) - acted)


def flagged(row: dict[str, Any]) -> bool:
    return "premature_stop" in user_review.flagged(row)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=0.5)
    p.add_argument("--out", default="runs/user_review_stops")
    ns = p.parse_args()
    os.environ.setdefault("TAU_FAULTS_SEED", "7")
    lines = [
        "| set | tasks (with a required write) | clean (scripted + serve-user): flagged | stopped early "
        "| before a required write | caught | flagged | precision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    totals: Counter[str] = Counter()
    for benchmark, domain in user_review.SETS:
        writes = required(benchmark, domain)
        out = Path(ns.out) / f"{benchmark}_{domain}"
        clean = user_review.rollout(out / "scripted", benchmark, domain)  # tau_user: scripted
        clean += user_review.with_user_server(out / "clean", benchmark, domain, None)[0]
        faulty, _ = user_review.with_user_server(out / "faulty", benchmark, domain, f"early_stop:{ns.rate}")
        stopped = [r for r in faulty if EARLY_STOP_LINE in str((r["metadata"].get("tau_review") or {}).get("stop"))]
        truth = [r for r in faulty if premature(r, writes)]
        hit = [r for r in faulty if flagged(r)]
        caught = sum(flagged(r) for r in truth)
        right = sum(premature(r, writes) for r in hit)
        counts = {"clean": sum(map(flagged, clean)), "stopped": len(stopped), "truth": len(truth)}
        counts |= {"caught": caught, "flagged": len(hit), "right": right}
        totals.update(counts)
        precision = f"{right / len(hit):.3f}" if hit else "n/a"
        lines.append(
            f"| {benchmark}/{domain} test | {len(writes)} ({sum(bool(a or u) for a, u in writes.values())}) | "
            f"{counts['clean']} | {len(stopped)} | {len(truth)} | {caught} | {len(hit)} | {precision} |"
        )
        print(f"done {benchmark}/{domain}", file=sys.stderr)
    recall = totals["caught"] / totals["truth"] if totals["truth"] else float("nan")
    precision = totals["right"] / totals["flagged"] if totals["flagged"] else float("nan")
    print("\n".join(lines))
    print(
        f"\nall sets: clean flags {totals['clean']}; premature stops {totals['truth']}, caught {totals['caught']} "
        f"(recall {recall:.3f}); flagged {totals['flagged']} (precision {precision:.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
