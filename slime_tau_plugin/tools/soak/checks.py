"""What every sample ``generate`` returns must satisfy for slime to train on it (or drop it cleanly).

The soak's counters, not assertions: one misaligned sample among thousands must be counted and named,
not stop the run. The rules are the invariants of docs/ARCHITECTURE.md in their cheapest form.
"""

from __future__ import annotations

from typing import Any


def alignment_problem(sample: Any) -> str | None:
    """Why ``sample``'s token fields do not line up, or None when they do.

    tokens = prompt + response (a non-empty prompt), ``loss_mask`` and ``rollout_log_probs`` are
    ``response_length`` long, masked-out tokens carry log-prob 0, and a FAILED sample trains on nothing.
    """
    n = sample.response_length
    tokens = sample.tokens or []
    if n < 0 or len(tokens) <= n:
        return f"tokens={len(tokens)} is not prompt + response_length={n} with a non-empty prompt"
    for name in ("loss_mask", "rollout_log_probs"):
        values = getattr(sample, name)
        if values is None or len(values) != n:
            return f"{name} has {None if values is None else len(values)} entries, response_length={n}"
    if any(m not in (0, 1) for m in sample.loss_mask):
        return "loss_mask holds values other than 0 and 1"
    if any(m == 0 and lp != 0.0 for m, lp in zip(sample.loss_mask, sample.rollout_log_probs, strict=True)):
        return "a masked-out token has a non-zero log-prob"
    if sample.status.name == "FAILED" and (any(sample.loss_mask) or not sample.remove_sample):
        return "a FAILED sample is trained on or not removed"
    return None


def is_lost(sample: Any) -> bool:
    """``generate`` returned without setting a status (slime would wait on, or drop, a PENDING sample)."""
    return sample.status.name == "PENDING"
