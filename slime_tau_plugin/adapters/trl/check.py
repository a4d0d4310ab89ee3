"""What the CPU example and the tests check on TRL's own trainer: :func:`recording_trainer_class`.

A ``GRPOTrainer`` subclass that keeps, for each generation batch, what our rollout function returned and what
TRL built from it to train on (its ``completion_mask`` times ``tool_mask``, which our ``env_mask`` becomes, and
the advantages). :func:`check_batches` compares them: the mask TRL trains on equals our loss mask on every row
(and is 0 on TRL's padding), the reward TRL's ``tau_reward`` returned is τ's, a row that must not train has
advantage 0. Imports TRL and torch only inside :func:`recording_trainer_class`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One generation batch: our rollout's output and TRL's training tensors as lists."""

    rollout: dict[str, list[Any]]
    trained_mask: list[list[int]]
    """TRL's ``completion_mask * tool_mask`` per row (padded to the batch's longest completion)."""
    advantages: list[float]


def recording_trainer_class() -> type:
    """``GRPOTrainer`` keeping a :class:`BatchRecord` per generation batch in ``self.tau_batches``."""
    from trl import GRPOTrainer

    class RecordingGRPOTrainer(GRPOTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tau_batches: list[BatchRecord] = []
            self._tau_last_rollout: dict[str, list[Any]] = {}
            inner = self.rollout_func

            def recorded(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
                output = inner(prompts, trainer)
                self._tau_last_rollout = {k: list(v) if isinstance(v, list) else v for k, v in output.items()}
                return output

            self.rollout_func = recorded

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            out = super()._generate_and_score_completions(inputs)
            mask = out["completion_mask"] * out["tool_mask"] if "tool_mask" in out else out["completion_mask"]
            self.tau_batches.append(
                BatchRecord(self._tau_last_rollout, mask.int().tolist(), out["advantages"].float().tolist())
            )
            return out

    return RecordingGRPOTrainer


def check_batches(batches: list[BatchRecord]) -> dict[str, Any]:
    """The checks over every recorded batch (each a count or a bool; ``masks_equal`` and ``rewards_equal`` are
    what must hold)."""
    rows = trainable = model_tokens = 0
    masks_equal = rewards_equal = True
    rewards: list[float | None] = []
    for batch in batches:
        out = batch.rollout
        for i, ours in enumerate(out["env_mask"]):
            rows += 1
            theirs = batch.trained_mask[i]
            masks_equal &= theirs[: len(ours)] == list(ours) and not any(theirs[len(ours) :])
            score = out["tau_score"][i]
            rewards.append(score)
            if score is None:
                rewards_equal &= batch.advantages[i] == 0.0 and not any(ours)
            else:
                trainable += 1
                model_tokens += sum(ours)
                rewards_equal &= math.isfinite(score) and math.isfinite(batch.advantages[i])
    return {
        "rows": rows,
        "trainable_rows": trainable,
        "model_tokens": model_tokens,
        "rewards": rewards,
        "masks_equal": bool(masks_equal),
        "rewards_equal": bool(rewards_equal),
    }
