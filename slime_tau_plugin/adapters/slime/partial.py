"""slime's partial and fully-async rollouts: which samples resume, what their turns may train on, what was lost.

With ``--partial-rollout``, slime's end-of-step ``abort`` hands the groups still in flight back to its buffer
and the next step passes the same ``Sample`` objects to ``generate`` again (its fully-async worker does the same
with ABORTED groups after a weight update). ``generate`` then suspends an aborted episode into the sample
(``metadata["tau_episode_state"]``, an ``EpisodeState``) and resumes it from there: :func:`stored_state` reads
it back, and the process that plays it checks that the sample still holds the tokens the state says. Without
``--partial-rollout`` an ABORTED sample restarts clean, and an episode slime aborts is thrown away:
:class:`AbortTally` counts those (slime never shows them to a hook) for the step's metrics.

Weight versions: each model segment keeps the version that sampled it. slime's
``--mask-offpolicy-in-partial-rollout`` zeroes the whole earlier response; ``tau_max_weight_lag`` masks, at the
end, the turns sampled more than that many weight versions before the episode's last one (the rollout log hook
masks again against the weights that train them: ``weight_lag.py``). Imports no slime.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode.state import METADATA_KEY
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.shared import shared_state

__all__ = ["AbortTally", "abort_tally", "offpolicy_tokens", "stale_mask", "stored_state", "suspends", "weight_lags"]


def suspends(args: Any) -> bool:
    """Whether aborted episodes are kept to resume (slime's ``--partial-rollout``)."""
    return bool(getattr(args, "partial_rollout", False))


def stored_state(args: Any, sample: Any) -> Any:
    """The suspended state to resume ``sample`` from (``EpisodeState.to_json()`` data): an ABORTED sample that
    holds one, with ``--partial-rollout`` on; else None. The process that plays it parses and checks it against
    the tokens the sample holds (``engine.episode.request.StoredState.load``)."""
    raw = (getattr(sample, "metadata", None) or {}).get(METADATA_KEY)
    if raw is None or not suspends(args) or getattr(getattr(sample, "status", None), "name", None) != "ABORTED":
        return None
    return raw


def weight_lags(traj: Trajectory) -> list[int | None]:
    """Per segment: how many newer weight versions sampled later turns of the episode (None: not a model turn)."""
    versions = [seg.weight_version for seg in traj.segments]
    lags: list[int | None] = []
    for i, (seg, version) in enumerate(zip(traj.segments, versions, strict=True)):
        if not seg.is_trainable:
            lags.append(None)
            continue
        later = {v for v in versions[i + 1 :] if v is not None and v != version}
        lags.append(len(later) if version is not None else 0)
    return lags


def stale_mask(traj: Trajectory, max_lag: int | None) -> list[int]:
    """The loss mask with every model turn older than ``max_lag`` weight versions zeroed (None: as it is)."""
    mask: list[int] = []
    for seg, lag in zip(traj.segments, weight_lags(traj), strict=True):
        keep = seg.is_trainable and (max_lag is None or (lag or 0) <= max_lag)
        mask.extend([1 if keep else 0] * len(seg.ids))
    return mask


def offpolicy_tokens(traj: Trajectory) -> int:
    """Model ids sampled by weights older than the episode's last version."""
    return sum(len(seg.ids) for seg, lag in zip(traj.segments, weight_lags(traj), strict=True) if lag)


@dataclass(slots=True)
class AbortTally:
    """Episodes slime aborted at a step's end since the last log: thrown away, or suspended to resume."""

    thrown_away: int = 0
    thrown_away_turns: int = 0
    suspended: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def note(self, result: EpisodeResult) -> None:
        if result.termination is not TerminationReason.ABORTED:
            return
        with self._lock:
            if result.state is not None:
                self.suspended += 1
            else:
                self.thrown_away += 1
                self.thrown_away_turns += result.num_turns

    def take(self) -> dict[str, float]:
        """The counts as metrics (``partial/...``), reset to zero."""
        with self._lock:
            out = {
                "partial/aborted_thrown_away": float(self.thrown_away),
                "partial/aborted_thrown_away_turns": float(self.thrown_away_turns),
                "partial/aborted_suspended": float(self.suspended),
            }
            self.thrown_away = self.thrown_away_turns = self.suspended = 0
        return out


def abort_tally() -> AbortTally:
    """The process's tally (slime's rollout manager runs ``generate`` and the log hook in one process)."""
    return shared_state().part(AbortTally)


def resume_metrics(metas: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Per-domain: share of episodes resumed, policy turns reused per episode, off-policy share of model ids."""
    n = len(metas) or 1
    model_ids = sum(float(m.get("tau_model_tokens") or 0) for m in metas)
    return {
        "partial/resumed": sum(1 for m in metas if m.get("tau_suspensions")) / n,
        "partial/turns_reused_per_episode": sum(float(m.get("tau_turns_reused") or 0) for m in metas) / n,
        "partial/offpolicy_token_share": (
            sum(float(m.get("tau_offpolicy_tokens") or 0) for m in metas) / model_ids if model_ids else 0.0
        ),
    }
