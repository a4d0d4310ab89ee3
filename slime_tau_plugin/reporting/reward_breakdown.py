"""Per-domain means of the reward breakdown's partial scores, for slime's and verl's metric logs.

τ's reward is all-or-nothing, so ``reward_mean`` stays flat while a policy learns to get part of a task
right. The env backends put each part's fraction into ``reward_info`` (``partial_scores``: ``DB``,
``ACTION``, ``COMMUNICATE``, ``ENV_ASSERTION``, ``NL_ASSERTION``, v1's ``OUTPUTS``) and their mean
(``partial_score``); the definitions are in ``envs/tau2_reward.py`` and ``envs/tau1_reward.py``. This
module only averages them: a pure function of the samples, with no slime import, so ``metrics.py`` (the
log hooks) and the CLI can both call it. A sample without ``partial_score`` (a FAILED episode, whose
reward was never computed, or a sample another generate function filled) is left out of the means
rather than counted as 0, so a user-simulator outage shows in the failure rate, not here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

__all__ = ["reward_breakdown_metrics"]


def reward_breakdown_metrics(
    samples: Iterable[Any], prefix: str = "", default_domain: str = "tau2/retail"
) -> dict[str, float]:
    """Per domain: ``partial_score_mean``, ``partial/<PART>_mean`` per part, and ``partial_score_count``.

    Keys are ``<prefix><benchmark>/<domain>/<name>`` like ``metrics.episode_metrics`` (pass its prefix,
    e.g. ``rollout/tau/``). ``samples`` are slime ``Sample`` objects or ``samples.jsonl`` rows (dicts), in
    any nesting of lists (slime hands over groups). A part's mean is over the samples that scored it.
    """
    scores: dict[str, list[float]] = defaultdict(list)
    parts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sample in _flatten(samples):
        meta = sample.get("metadata") if isinstance(sample, dict) else getattr(sample, "metadata", None)
        info = meta.get("reward_info") if isinstance(meta, dict) else None
        if not isinstance(info, dict) or not _is_number(info.get("partial_score")):
            continue
        domain = f"{meta['benchmark']}/{meta['domain']}" if meta.get("benchmark") and meta.get("domain") else None
        domain = domain or default_domain
        scores[domain].append(float(info["partial_score"]))
        for name, value in (info.get("partial_scores") or {}).items():
            if _is_number(value):
                parts[domain][str(name)].append(float(value))
    out: dict[str, float] = {}
    for domain in sorted(scores):
        where = f"{prefix}{domain}/"
        out[where + "partial_score_mean"] = sum(scores[domain]) / len(scores[domain])
        out[where + "partial_score_count"] = float(len(scores[domain]))
        for name, values in sorted(parts[domain].items()):
            out[f"{where}partial/{name}_mean"] = sum(values) / len(values)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flatten(samples: Iterable[Any]) -> list[Any]:
    flat: list[Any] = []
    for item in samples:
        flat.extend(_flatten(item) if isinstance(item, list) else [item])
    return flat
