"""One step's rows as slime's hooks read a ``Sample``, and the step's numbers over them: TRL's and verl's one piece.

slime's own hooks read its ``Sample``; TRL's rollout and verl's trainer have no such object, so each adapter turns
its rows into :class:`EpisodeView` (TRL from the played episode, verl from ``extra_fields``) and
:func:`step_metrics` keys the step's numbers the one way: ``<prefix><benchmark>/<domain>/<metric>`` for each domain,
with the adapter's own per-domain numbers (TRL: slime's ``summary.domain_summary``; verl: its ``extra_fields``
names), and ``<prefix>failed/share``, ``<prefix>failed/<endpoint>`` (share of the step's episodes). The failure
guard reads the same views (``failure_guard.failure_endpoint``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.episode.result import SampleStatus
from slime_tau_plugin.reporting.failure_guard import failure_endpoint

__all__ = ["PREFIX", "EpisodeView", "step_metrics"]

PREFIX = "tau/"


@dataclass(frozen=True, slots=True)
class EpisodeView:
    """One row as slime's hooks read a ``Sample`` (duck-typed: they read only these attributes); small and
    picklable, so TRL's processes can gather them."""

    status: SampleStatus
    metadata: dict[str, Any]
    """slime's metadata names: ``benchmark``, ``domain``, ``task_id``, ``termination_reason``, ``failed_endpoint``..."""
    reward: float
    """τ's reward (unshaped)."""
    response_length: int
    loss_mask: list[int] = field(default_factory=list)
    remove_sample: bool = False
    group: Any = None
    """Its GRPO group, where the adapter feeds the failure guard by group (TRL's global group index)."""


DomainNumbers = Callable[[Sequence[EpisodeView]], Mapping[str, float]]
"""One domain's numbers over its views (the adapter's own names)."""


def step_metrics(views: Sequence[EpisodeView], domain_numbers: DomainNumbers, prefix: str = PREFIX) -> dict[str, float]:
    """The step's numbers: ``domain_numbers`` per ``benchmark/domain``, and the share FAILED per endpoint."""
    if not views:
        return {}
    by_domain: dict[str, list[EpisodeView]] = defaultdict(list)
    for view in views:
        by_domain[f"{view.metadata.get('benchmark')}/{view.metadata.get('domain')}"].append(view)
    metrics: dict[str, float] = {}
    for domain, group in sorted(by_domain.items()):
        metrics |= {f"{prefix}{domain}/{name}": float(value) for name, value in domain_numbers(group).items()}
    causes = Counter(failure_endpoint(v) for v in views)
    causes.pop(None, None)
    metrics[f"{prefix}failed/share"] = sum(causes.values()) / len(views)
    metrics |= {f"{prefix}failed/{endpoint}": n / len(views) for endpoint, n in sorted(causes.items())}
    return metrics
