"""A bound on the groups slime draws again in one rollout step: ``tau_max_redraws`` over-sampling batches.

slime's ``generate_rollout_async`` draws ``--over-sampling-batch-size`` groups (O) whenever fewer than
``--rollout-batch-size`` (T) candidates are left (``remaining_batch_size``: groups drawn minus groups the filter
dropped). A filter that only ever says ``keep=False`` makes a step whose pass rates sit at 0 or 1 draw batch after
batch until T groups have spread. slime's contract for a bound is ``DynamicFilterOutput.keep_when_insufficient``
(``filter_hub/base_types.should_drop_dynamic_filter_output``, used by its own
``check_reward_nonzero_std_with_fallback``): a rejected group so marked is kept once dropping it would leave fewer
than T candidates, and then no further batch is drawn.

Drawing starts at ``ceil(T / O)`` batches and slime refills to the smallest multiple of O that is at least
``T + dropped``, so after ``d`` drops the step has drawn ``ceil((T + d) / O) - ceil(T / O)`` batches more than its
first round (exact, since slime asserts O >= T). :class:`RedrawBudget` counts the step's drops and lets a rejected
group drop only while that count of redraws stays within ``tau_max_redraws``; from the first group whose drop would
draw one more batch on, every rejected group carries ``keep_when_insufficient`` and, at that point exactly T
candidates being left, slime keeps it: the group is trained *short* of spread (zero spread: advantage 0 under GRPO;
all FAILED: loss mask 0). ``0`` is slime's own fallback filter; the default (1) allows one more batch a step.

The step is slime's current rollout id (``sample_hooks._current_rollout_id``, set by ``RolloutManager.generate``);
the rollout log hook takes the step's numbers (:meth:`RedrawBudget.take`) and starts the next. Imports no slime.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.shared import shared_state

logger = logging.getLogger(__name__)

__all__ = ["SHORT_PREFIX", "RedrawBudget", "RedrawStep", "StepShape", "redraw_budget", "redraws_after"]

SHORT_PREFIX = "short_"
"""``tau_group_filter`` of a rejected group slime keeps to fill the step: ``short_<reason>``."""


@dataclass(frozen=True, slots=True)
class StepShape:
    """What bounds one step's draws: T and O from slime's args, and ``tau_max_redraws``."""

    batch: int
    over_sampling: int
    max_redraws: int

    @classmethod
    def from_args(cls, args: Any, max_redraws: int) -> StepShape | None:
        """None without slime's ``rollout_batch_size`` (a minimal ``args``: no bound can be computed)."""
        batch = getattr(args, "rollout_batch_size", None)
        if not isinstance(batch, int) or batch < 1:
            return None
        over = getattr(args, "over_sampling_batch_size", None)
        over = over if isinstance(over, int) and over >= batch else batch  # slime's default and its assertion
        return cls(batch, over, max_redraws)


def redraws_after(shape: StepShape, drops: int) -> int:
    """Batches slime has drawn beyond its first round once ``drops`` groups of the step were dropped."""
    first = math.ceil(shape.batch / shape.over_sampling)
    return math.ceil((shape.batch + drops) / shape.over_sampling) - first


@dataclass(frozen=True, slots=True)
class RedrawStep:
    """One step's numbers: groups dropped, redraw batches those drops caused, groups kept short of spread."""

    rollout_id: int | None
    dropped: int
    redraws: int
    kept_short: int
    max_redraws: int | None

    def metrics(self) -> dict[str, float]:
        """``redraw/*`` (under the log hook's ``rollout/tau/``); ``bound_reached`` 1 when groups were kept short."""
        out = {"redraw/redraws": float(self.redraws), "redraw/dropped": float(self.dropped)}
        out["redraw/kept_short"] = float(self.kept_short)
        out["redraw/bound_reached"] = float(self.kept_short > 0)
        if self.max_redraws is not None:
            out["redraw/max_redraws"] = float(self.max_redraws)
        return out


class RedrawBudget:
    """The process's current step: its drops so far and the groups it kept short (behind one lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._rollout_id: int | None = None
        self._dropped = self._kept_short = 0
        self._shape: StepShape | None = None

    def judge(self, shape: StepShape | None, rollout_id: int | None, rejected: bool) -> bool:
        """Count a group of the step ``rollout_id``; for a ``rejected`` one, True = keep it when insufficient
        (the bound is reached), False = drop it. Without a ``shape`` every rejected group drops (no bound known)."""
        with self._lock:
            self._enter(shape, rollout_id)
            if not rejected:
                return False
            if shape is None or (not self._kept_short and redraws_after(shape, self._dropped + 1) <= shape.max_redraws):
                self._dropped += 1
                return False
            self._kept_short += 1
            first, dropped = self._kept_short == 1, self._dropped
        if first:  # once a step, so a run whose pass rates sit at 0 or 1 says so every step
            logger.warning(
                "tau redraw bound: step %s drew %d more batch(es) of %d groups (tau_max_redraws=%d) and dropped %d "
                "groups; slime keeps its remaining rejected groups to fill its %d (they train short of spread: "
                "advantage 0, or loss mask 0 when all FAILED)",
                "?" if rollout_id is None else rollout_id,
                redraws_after(shape, dropped),
                shape.over_sampling,
                shape.max_redraws,
                dropped,
                shape.batch,
            )
        return True

    def take(self) -> RedrawStep | None:
        """The step's numbers (None if the filter saw no group since the last take); the next step starts."""
        with self._lock:
            if not self._open:
                return None
            shape = self._shape
            step = RedrawStep(
                self._rollout_id,
                self._dropped,
                0 if shape is None else redraws_after(shape, self._dropped),
                self._kept_short,
                None if shape is None else shape.max_redraws,
            )
            self._open = False
            return step

    def reset(self) -> None:
        """Forget the step (a new run in the same process, or a test)."""
        with self._lock:
            self._open = False

    def _enter(self, shape: StepShape | None, rollout_id: int | None) -> None:
        """Open a step on its first group, or a new one when slime's rollout id moved on without a take."""
        if self._open and (rollout_id is None or rollout_id == self._rollout_id):
            return
        self._open, self._rollout_id, self._shape = True, rollout_id, shape
        self._dropped = self._kept_short = 0


def redraw_budget() -> RedrawBudget:
    """The process's budget (slime runs the filter and the log hook in its rollout manager's process)."""
    return shared_state().part(RedrawBudget)
