"""What the customer's shared opening and exact-request cache saved in a step: :func:`user_share_metrics`.

Reads the per-episode counts the LLM user's client leaves in each sample's metadata (``net/stats.NetStats``:
``user_cache_hits``/``user_cache_misses``, ``user_opening_asked``/``user_opening_shared``) and sums them over a
step. Names are ``tau_user/cache_*`` and ``tau_user/shared_opening_*`` (the customer's cost counters are
``tau_user/cost_*``); empty when neither feature was on. Imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

USER_SHARE_KEYS = ("user_cache_hits", "user_cache_misses", "user_opening_asked", "user_opening_shared")
"""The per-episode counts (``net/stats.NetStats``) the step's numbers sum."""


def user_share_metrics(metas: Iterable[dict[str, Any]]) -> dict[str, float]:
    """``tau_user/cache_{hits,misses,hit_rate}`` and ``tau_user/shared_opening_{requests,reused,saved_share}``:
    requests answered from the cache, openings asked once per group and taken by the rest of it."""
    totals = dict.fromkeys(USER_SHARE_KEYS, 0)
    for meta in metas:
        for key in totals:
            value = meta.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] += value
    out: dict[str, float] = {}
    hits, misses = totals["user_cache_hits"], totals["user_cache_misses"]
    if hits or misses:
        out |= {
            "tau_user/cache_hits": float(hits),
            "tau_user/cache_misses": float(misses),
            "tau_user/cache_hit_rate": hits / (hits + misses),
        }
    asked, shared = totals["user_opening_asked"], totals["user_opening_shared"]
    if asked or shared:
        out |= {
            "tau_user/shared_opening_requests": float(asked),
            "tau_user/shared_opening_reused": float(shared),
            "tau_user/shared_opening_saved_share": shared / (asked + shared),
        }
    return out
