"""Weight lag in slime's own loops on CPU: a stand-in for slime's weight push, and the lag each step trains with.

slime pushes the actor's weights to SGLang once before the first rollout and after every train step; on CPU there
is no trainer, so :func:`push` sets the oracle server's ``weight_version`` (SGLang's ``/update_weight_version``)
at the points slime's drivers would: ``train.py`` after every step, ``train_async.py`` after every step but the
first (its rollout ``r + 1`` is drawn while ``r`` trains, and the push waits for it). :class:`LagLog` runs the
log hook's ``weight_lag.lag_metrics`` (and, with ``tau_max_weight_lag``, the reward post-process's
``mask_for_training``) on each step's samples and sums trainable ids by lag, before that mask, for the report.
"""

from __future__ import annotations

import json
import urllib.request
from collections import Counter

from slime_tau_plugin.adapters.slime.weight_lag import HIST_TOP, lag_metrics, mask_for_training, sample_lags


def push(url: str, version: int) -> None:
    """What slime's weight update leaves on the engines: replies now report ``version``."""
    body = json.dumps({"new_version": str(version)}).encode()
    request = urllib.request.Request(f"{url}/update_weight_version", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        reply.read()


def with_max_lag(tau_yaml: str, max_lag: int | None) -> str:
    """The plugin config with ``tau_max_weight_lag`` (None leaves it unset)."""
    return tau_yaml if max_lag is None else tau_yaml.replace("}", f", tau_max_weight_lag: {max_lag}}}")


class LagLog:
    """Per step: the trainer's version, the trainable ids by lag, the share older than the limit."""

    def __init__(self, max_lag: int | None, limit: int = 1) -> None:
        self.max_lag = max_lag
        self.limit = limit if max_lag is None else max_lag
        """The limit the stale share is read against (the config's, else ``limit``)."""
        self.rows: list[tuple[int, dict[str, float], Counter]] = []

    def step(self, rollout_id: int, samples: list) -> dict[str, float]:
        metrics = lag_metrics(samples, rollout_id, self.limit)
        ids: Counter = Counter()
        for sample in samples:
            ids += sample_lags(sample, sample.metadata.get("tau_train_version"))
        self.rows.append((rollout_id, metrics, ids))
        mask_for_training(samples, rollout_id, self.max_lag)  # what the reward post-process does before training
        return metrics

    def report(self, first: int = 1) -> str:
        """A line per step, then steps ``first``+ together (a full pipeline: the first step has nothing older)."""
        lines = [f"step  train_v  trainable_ids  lag 0/1/2/3/{HIST_TOP}+/unknown (share of ids)  stale>{self.limit}"]
        for rollout_id, metrics, ids in self.rows:
            lines.append(f"{rollout_id:>4}  {metrics.get('lag/train_version', -1):>7.0f}  {_line(ids, self.limit)}")
        total = sum((ids for r, _, ids in self.rows if r >= first), Counter())
        n = sum(total.values())
        known = n - total[None]
        mean = sum(k * c for k, c in total.items() if k is not None) / known if known else 0.0
        lines.append(f"steps {first}+ {'':>2}  {_line(total, self.limit)}  mean lag {mean:.2f}")
        return "\n".join(lines)


def _line(ids: Counter, limit: int) -> str:
    n = sum(ids.values()) or 1
    buckets = [ids[k] for k in range(HIST_TOP)]
    buckets.append(sum(c for k, c in ids.items() if k is not None and k >= HIST_TOP))
    buckets.append(ids[None])
    stale = sum(c for k, c in ids.items() if k is not None and k > limit)
    shares = "/".join(f"{b / n:.2f}" for b in buckets)
    return f"{sum(ids.values()):>13}  {shares:<40}  {stale / n:.3f}"
