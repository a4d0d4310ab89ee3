"""Per-step numbers of what the simulated customer cost, from the samples' ``metadata["tau_user_cost"]``.

Names (under each front door's prefix and domain, like the other per-domain numbers):

- ``tau_user/cost_requests_per_episode``, ``tau_user/cost_failed_requests_per_episode``: HTTP requests to the
  customer's endpoint, every try counted (what it served), and those that failed;
- ``tau_user/cost_prompt_tokens_per_episode``, ``tau_user/cost_completion_tokens_per_episode``: its ``usage``;
- ``tau_user/cost_wait_share``: the step's time waiting for the customer over the step's episode wall time (in
  [0, 1]; a pooled share, so long episodes weigh as much as they cost);
- ``tau_user/cost_judge_requests_per_episode``, ``tau_user/cost_judge_tokens_per_episode`` (prompt + completion),
  ``tau_user/cost_judge_wait_share``: the same for the review judge's rubric;
- ``tau_user/cost_review_cpu_ms_per_episode``: CPU time of the review's deterministic checks.

Empty when no sample carries a cost (rows written before it existed). A pure function of the samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.episode.cost import COST_KEY, CustomerCost

__all__ = ["PREFIX", "cost_metrics"]

PREFIX = "tau_user/cost_"


def cost_metrics(metas: Sequence[dict[str, Any]]) -> dict[str, float]:
    """What the customer cost over one step's (or one domain's) episodes, per episode and as shares of wall time."""
    costs = [CustomerCost.from_metadata(m.get(COST_KEY)) for m in metas if isinstance(m.get(COST_KEY), dict)]
    if not costs:
        return {}
    n = len(costs)
    wall = sum(c.wall_s for c in costs)
    numbers = {
        "requests_per_episode": sum(c.user.requests for c in costs) / n,
        "failed_requests_per_episode": sum(c.user.failed for c in costs) / n,
        "prompt_tokens_per_episode": sum(c.user.prompt_tokens for c in costs) / n,
        "completion_tokens_per_episode": sum(c.user.completion_tokens for c in costs) / n,
        "wait_share": _share(sum(c.user.wait_s for c in costs), wall),
        "judge_requests_per_episode": sum(c.judge.requests for c in costs) / n,
        "judge_tokens_per_episode": sum(c.judge.prompt_tokens + c.judge.completion_tokens for c in costs) / n,
        "judge_wait_share": _share(sum(c.judge.wait_s for c in costs), wall),
        "review_cpu_ms_per_episode": 1000.0 * sum(c.review_cpu_s for c in costs) / n,
    }
    return {f"{PREFIX}{name}": value for name, value in numbers.items()}


def _share(part: float, whole: float) -> float:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else 0.0
