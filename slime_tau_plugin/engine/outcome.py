"""What every front door does with an :class:`EpisodeResult`, written once.

slime's ``generate``, verl's ``TauAgentLoop`` and the CLI turn a result into their trainer's sample with
the same rules: the result of an episode that failed before its task was known
(:func:`failed_result`), the one filler id a response needs when it is empty (:func:`filler_id`), the
trajectory a trainer may learn from (:func:`trainable_trajectory`, by ``TerminationReason.is_trainable``)
and the training reward (:func:`training_reward`: τ's reward, optionally shaped by its partial score).
Imports nothing from slime or verl.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode.task_ref import UNKNOWN_TASK_ID, TaskRef
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import failed_endpoint_of


def failed_result(config: TauConfig, exc: BaseException, task: TaskRef | None = None) -> EpisodeResult:
    """The result of an episode that failed before it could start (task id ``?`` when unknown)."""
    task = task or TaskRef(config.benchmark, config.domain, config.split, UNKNOWN_TASK_ID)
    error = f"{type(exc).__name__}: {exc}"
    return EpisodeResult(task, TerminationReason.ENV_ERROR, None, error=error, failed_endpoint=failed_endpoint_of(exc))


def filler_id(tokenizer: Any) -> int:
    """The id a response gets when it has none (trainers need ``response_length >= 1``): end-of-text, else pad."""
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def trainable_trajectory(result: EpisodeResult, tokenizer: Any) -> Trajectory:
    """The result's trajectory as a trainer stores it: never empty, and with no trainable id when the
    episode must not train (:attr:`TerminationReason.is_trainable`). A suspended episode (``result.state``)
    keeps its trajectory as it is, even empty: it goes on later from exactly these ids."""
    traj = result.trajectory
    if result.state is not None and traj is not None:
        return traj
    if traj is None or traj.response_length == 0:  # a fresh copy: the result's own trajectory stays as it was
        filler = filler_id(tokenizer)
        traj = Trajectory(traj.prompt_ids if traj is not None else (filler,))
        traj.add_continuation([filler])
    return traj if result.termination.is_trainable else traj.without_training()


def training_reward(result: EpisodeResult, config: TauConfig, *, evaluation: bool) -> float:
    """τ's reward, plus ``tau_reward_shaping`` x ``reward_info["partial_score"]`` in training (never in
    evaluation); 0 for an episode that must not train."""
    if not result.termination.is_trainable:
        return 0.0
    reward = float(result.reward)
    if config.reward_shaping > 0 and not evaluation:
        partial = result.reward_info.get("partial_score")
        if isinstance(partial, (int, float)) and not isinstance(partial, bool):
            reward += config.reward_shaping * float(partial)
    return reward
