"""Per-step numbers of the review, from the samples' ``metadata["tau_review"]`` (a pure function of them).

Names (under each front door's prefix): ``review/reviewed`` (share of episodes reviewed), ``review/flagged`` (share
with any finding), ``review/excluded`` (episodes taken out as ``user_error``: a count, as they are left out of the
step's other means), ``review/severity/<severity>``, ``review/tag/<tag>`` and ``review/check/<check>`` (shares of
episodes), ``review/judged`` and ``review/judge_failed`` (counts) and ``review/task/<task id>/excluded`` for each
task that lost an episode. Imports only ``verdict``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag, Severity

__all__ = ["REVIEW_KEY", "is_customer_error", "review_metrics"]

REVIEW_KEY = "tau_review"


def is_customer_error(meta: dict[str, Any] | None) -> bool:
    """The review took this episode out (``user_error`` blamed on the customer): never scored in pass^k."""
    review = (meta or {}).get(REVIEW_KEY)
    return isinstance(review, dict) and bool(review.get("excluded"))


def review_metrics(metas: Sequence[dict[str, Any]], task_of: Sequence[str] | None = None) -> dict[str, float]:
    """The review's numbers over one step's (or one domain's) episodes; empty when none was reviewed."""
    reviews = [m.get(REVIEW_KEY) for m in metas]
    done = [r for r in reviews if isinstance(r, dict)]
    if not done:
        return {}
    n = len(metas)
    severities: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    checks: Counter[str] = Counter()
    for review in done:
        findings = review.get("findings") or []
        if review.get("severity"):
            severities[str(review["severity"])] += 1
        tags.update({t for f in findings for t in f.get("tags", ())})
        checks.update({str(f.get("check")) for f in findings})
    out = {
        "review/reviewed": len(done) / n,
        "review/flagged": sum(bool(r.get("findings")) for r in done) / n,
        "review/excluded": float(sum(bool(r.get("excluded")) for r in done)),
        "review/judged": float(sum(bool(r.get("judged")) for r in done)),
        "review/judge_failed": float(sum(bool(r.get("judge_error")) for r in done)),
    }
    out |= {f"review/severity/{s.value}": severities[s.value] / n for s in Severity}
    out |= {f"review/tag/{t.value}": tags[t.value] / n for t in ReviewTag}
    out |= {f"review/check/{c.value}": checks[c.value] / n for c in ReviewCheck}
    if task_of is not None:
        lost = Counter(task for task, meta in zip(task_of, metas, strict=True) if is_customer_error(meta))
        out |= {f"review/task/{task}/excluded": float(count) for task, count in sorted(lost.items())}
    return out
