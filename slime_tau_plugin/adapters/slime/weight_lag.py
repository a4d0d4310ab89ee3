"""Weight lag when a sample is trained: how many weight versions older than the trainer's each trainable id is.

slime's drivers push the actor's weights to the rollout engines once before the first rollout and once after
every train step (``train.py`` always; ``train_async.py`` with ``--update-weights-interval 1``, its default, which
the launch scripts keep), and no push falls inside the first rollout a process generates (a restarted run counts
versions from its own first push again, as slime's weight updater does). So the weights
that train rollout ``r`` are version ``V0 + (r - r0)``, where ``r0`` is the first rollout this process logs and
``V0`` the version that sampled it, in both drivers (``train_async.py`` draws rollout ``r`` while ``r - 1``
trains, so its fresh turns are one version behind). A trainable id sampled by version ``v`` is trained with
lag ``V0 + (r - r0) - v``: 0 for a fresh turn of ``train.py``, 1 for ``train_async.py``'s, more for a resumed
episode's earlier turns, a finished sibling slime hands back (``--partial-rollout``: it returns COMPLETED
samples as they are) or a group that waited in the fully-async worker's queue. A step whose newest version is
newer than that (a push the assumption missed) moves the clock forward: no lag is negative.

``generate`` stores where each trainable segment lies in the response and the version that sampled it
(``metadata["tau_version_spans"]``, :func:`version_spans`); the rollout log hook reports the step's lags
(:func:`lag_metrics`). The mask that enforces ``tau_max_weight_lag`` against the trainer's version (loss mask and
log-prob 0 for older ids, :func:`mask_for_training`) runs in the reward post-process (``advantages.py``): slime's
contract is that ``_convert_samples_to_train_data`` calls ``_post_process_rewards(samples)`` and only then reads
``loss_mask`` and ``rollout_log_probs`` from those very samples, so the mask reaches the trained data whatever order
slime logs in. It also reaches what the episode-level mask cannot: finished siblings handed back and queued
groups. Versions that are not integers (SGLang's ``"default"`` before any push) count as ``unknown`` and are never
masked. Imports no slime.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.shared import shared_state

logger = logging.getLogger(__name__)

__all__ = [
    "HIST_TOP",
    "SPANS_KEY",
    "TrainClock",
    "lag_metrics",
    "mask_for_training",
    "mask_stale",
    "sample_lags",
    "train_clock",
    "version_spans",
]

SPANS_KEY = "tau_version_spans"
"""Sample metadata: ``[[start, length, version], ...]``, one per trainable segment that reports a version."""
HIST_TOP = 4
"""Histogram buckets: lag 0, 1, ..., ``HIST_TOP - 1`` and ``HIST_TOP`` or more (``lag/tokens_4plus``)."""


def version_spans(traj: Trajectory) -> list[list[Any]]:
    """Each trainable segment's ``[start in the response, length, weight version]`` (versions as SGLang gave them)."""
    spans: list[list[Any]] = []
    start = 0
    for seg in traj.segments:
        if seg.is_trainable and seg.weight_version is not None:
            spans.append([start, len(seg.ids), seg.weight_version])
        start += len(seg.ids)
    return spans


def _as_int(version: Any) -> int | None:
    try:
        return int(str(version))
    except ValueError:
        return None


class TrainClock:
    """The process's ``(r0, V0)``: the first rollout it logged with a numeric version, and that version."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._r0: int | None = None
        self._v0: int | None = None

    def version_at(self, rollout_id: int, newest: int | None) -> int | None:
        """The trainer's weight version when rollout ``rollout_id`` trains; ``newest``: the newest version that
        sampled any of its ids (None: the step holds none; then the clock alone answers, or None)."""
        with self._lock:
            if self._r0 is None:
                if newest is None:
                    return None
                self._r0, self._v0 = rollout_id, newest
            assert self._v0 is not None
            version = self._v0 + (rollout_id - self._r0)
            if newest is not None and newest > version:  # a push the driver model missed: never a negative lag
                self._v0 += newest - version
                version = newest
            return version

    def forget(self) -> None:
        """Start over (a test's new run in the same process)."""
        with self._lock:
            self._r0 = self._v0 = None


def train_clock() -> TrainClock:
    """The process's clock (slime's rollout manager runs ``generate`` and the log hook in one process)."""
    return shared_state().part(TrainClock)


def sample_lags(sample: Any, train_version: int | None) -> Counter[int | None]:
    """Trainable ids (loss mask 1) of ``sample`` by lag against ``train_version`` (None: version unknown).

    A sample slime will drop (``remove_sample``) trains on nothing; ids outside every span (a sample without
    ``tau_version_spans``) count as unknown."""
    out: Counter[int | None] = Counter()
    if getattr(sample, "remove_sample", False):
        return out
    length = int(getattr(sample, "response_length", 0) or 0)
    mask = getattr(sample, "loss_mask", None)
    mask = [1] * length if mask is None else list(mask)
    covered = 0
    for start, size, version in (getattr(sample, "metadata", None) or {}).get(SPANS_KEY) or []:
        trained = sum(mask[start : start + size])
        covered += trained
        v = _as_int(version)
        lag = None if v is None or train_version is None else max(0, train_version - v)
        if trained:
            out[lag] += trained
    if (rest := sum(mask) - covered) > 0:
        out[None] += rest
    return out


def lag_metrics(samples: Iterable[Any], rollout_id: int, max_lag: int | None) -> dict[str, float]:
    """``lag/*`` of one training step: the trainer's version, the histogram of trainable ids by lag (shares),
    mean and max lag, and with ``max_lag`` the share of trainable ids older than it (``lag/stale_token_share``).

    Writes each sample's ``tau_train_version`` and ``tau_train_lag`` (its oldest trainable id's lag) into its
    metadata; an empty dict when no trainable id has a known version (nothing trains, or nothing says its weights:
    samples another ``generate`` filled)."""
    samples = list(samples)
    version = _train_version(samples, rollout_id)
    total: Counter[int | None] = Counter()
    for sample in samples:
        lags = sample_lags(sample, version)
        total += lags
        known = [lag for lag in lags if lag is not None]
        if isinstance(getattr(sample, "metadata", None), dict):
            sample.metadata["tau_train_version"] = version
            sample.metadata["tau_train_lag"] = max(known, default=None)
    n = sum(total.values())
    known_n = n - total[None]
    if not known_n:
        return {}
    out = {f"lag/tokens_{k}": total[k] / n for k in range(HIST_TOP)}
    out[f"lag/tokens_{HIST_TOP}plus"] = sum(c for k, c in total.items() if k is not None and k >= HIST_TOP) / n
    out["lag/tokens_unknown"] = total[None] / n
    if version is not None:
        out["lag/train_version"] = float(version)
    out["lag/mean"] = sum(k * c for k, c in total.items() if k is not None) / known_n
    out["lag/max"] = float(max(k for k in total if k is not None))
    if max_lag is not None:
        out["lag/stale_token_share"] = sum(c for k, c in total.items() if k is not None and k > max_lag) / n
    return out


def _train_version(samples: Sequence[Any], rollout_id: int) -> int | None:
    """The trainer's version when rollout ``rollout_id`` trains (the same answer for the same step, whichever hook
    asks first)."""
    newest = max((v for s in samples for v in _versions(s) if v is not None), default=None)
    return train_clock().version_at(rollout_id, newest)


def mask_for_training(samples: Iterable[Any], rollout_id: int | None, max_lag: int | None) -> int:
    """Mask what ``tau_max_weight_lag`` refuses in the samples slime is about to turn into train data; returns how
    many trainable ids it masked (None ``max_lag``: none).

    With slime's ``rollout_id`` each sample's ``tau_train_version`` is (re)written from the clock; without it (not
    inside slime's ``RolloutManager``) the version the log hook wrote is used, and a step that has none is logged
    once and left as it is."""
    if max_lag is None:
        return 0
    samples = list(samples)
    if rollout_id is not None:
        version = _train_version(samples, rollout_id)
        for sample in samples:
            if isinstance(getattr(sample, "metadata", None), dict) and sample.metadata.get(SPANS_KEY):
                sample.metadata["tau_train_version"] = version
    elif any((getattr(s, "metadata", None) or {}).get(SPANS_KEY) for s in samples) and not any(
        (getattr(s, "metadata", None) or {}).get("tau_train_version") is not None for s in samples
    ):
        if shared_state().first_time("weight_lag", "no rollout id"):
            logger.warning(
                "tau_max_weight_lag=%d: slime's rollout id is unknown here and no log hook wrote the trainer's "
                "version, so stale turns are not masked (run under slime's RolloutManager)",
                max_lag,
            )
        return 0
    return mask_stale(samples, max_lag)


def _versions(sample: Any) -> Sequence[int | None]:
    return [_as_int(v) for _, _, v in (getattr(sample, "metadata", None) or {}).get(SPANS_KEY) or []]


def mask_stale(samples: Iterable[Any], max_lag: int | None) -> int:
    """Zero the loss mask (and log-prob, the invariant of docs/ARCHITECTURE.md) of every id more than ``max_lag``
    versions older than the weights that train it (``tau_train_version``, written by :func:`lag_metrics`);
    returns how many trainable ids it masked (None: masks nothing)."""
    masked = 0
    for sample in samples if max_lag is not None else ():
        meta = getattr(sample, "metadata", None) or {}
        version, mask = meta.get("tau_train_version"), getattr(sample, "loss_mask", None)
        if version is None or mask is None:
            continue
        for start, size, v in meta.get(SPANS_KEY) or []:
            old = _as_int(v)
            if old is None or version - old <= max_lag:
                continue
            masked += sum(mask[start : start + size])
            mask[start : start + size] = [0] * size
            if (log_probs := getattr(sample, "rollout_log_probs", None)) is not None:
                log_probs[start : start + size] = [0.0] * size
    return masked
