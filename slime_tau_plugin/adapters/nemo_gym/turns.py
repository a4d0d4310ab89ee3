"""A τ trajectory as NeMo Gym's per-turn token records, and back; imports no NeMo Gym.

NeMo Gym's training items (``TokenIDLogProbMixin``) carry, per model turn, ``prompt_token_ids`` (everything the
model was sent), ``generation_token_ids`` (what it sampled) and ``generation_log_probs``; a trainer (NeMo RL)
rebuilds one sequence from them, each turn's prompt extending the previous turn's prompt + generation. Our
trajectory is exactly that shape: each trainable segment is a model turn, everything held before it its prompt.
Two numbers that the per-turn records cannot hold travel beside them: where the episode's prompt ends
(``tau_prompt_len``) and the environment ids after the last model turn (``tau_tail_ids``), so
:func:`run_trajectory` gives back slime's ``tokens`` / ``loss_mask`` / ``rollout_log_probs`` unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.episode.trajectory import Trajectory

TOKEN_KEYS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


@dataclass(frozen=True, slots=True)
class TurnTokens:
    """One model turn as NeMo Gym's training item holds it."""

    prompt_token_ids: tuple[int, ...]
    generation_token_ids: tuple[int, ...]
    generation_log_probs: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class RunTrajectory:
    """A ``/run`` answer as slime's sample holds it: the view the cross-trainer parity test compares."""

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    log_probs: tuple[float, ...]
    reward: float | None
    """τ's reward; None for an episode that must not train (the row is masked: ``instance_config.mask_sample``)."""
    status: str


def gym_turns(traj: Trajectory) -> tuple[list[TurnTokens], list[int]]:
    """The model turns of ``traj`` (adjacent trainable segments are one turn) and the ids after the last one
    (with no turn, as in a FAILED episode: every id, the prompt first)."""
    turns: list[TurnTokens] = []
    held: list[int] = list(traj.prompt_ids)
    since: list[int] = list(traj.prompt_ids)  # ids held since the last turn's generation (all, before one)
    gen_ids: list[int] = []
    gen_lps: list[float] = []

    def close() -> None:
        if gen_ids:
            turns.append(TurnTokens(tuple(held[: len(held) - len(gen_ids)]), tuple(gen_ids), tuple(gen_lps)))
            gen_ids.clear()
            gen_lps.clear()

    for seg in traj.segments:
        if seg.is_trainable:
            since.clear()
            gen_ids.extend(seg.ids)
            gen_lps.extend(seg.log_probs)
        else:
            close()
            since.extend(seg.ids)
        held.extend(seg.ids)
    close()
    return turns, since


def run_trajectory(run: Mapping[str, Any]) -> RunTrajectory:
    """slime's view of a ``/run`` answer (a dict as NeMo Gym's client reads it); a masked row's reward is None and
    its placeholder turn (a failed episode without model turns) is not a turn.

    Raises:
        ValueError: a turn's prompt does not extend the previous turn's prompt + generation (not one sequence),
            or the lengths disagree.
    """
    masked = bool((run.get("instance_config") or {}).get("mask_sample"))
    placeholder = (run["response"].get("metadata") or {}).get("tau_placeholder") == "true"
    items = [] if placeholder else [item for item in run["response"]["output"] if all(k in item for k in TOKEN_KEYS)]
    prompt_len = int(run["tau_prompt_len"])
    ids: list[int] = []
    mask: list[int] = []
    lps: list[float] = []
    for n, item in enumerate(items):
        prompt, gen, gen_lps = item["prompt_token_ids"], item["generation_token_ids"], item["generation_log_probs"]
        if len(gen) != len(gen_lps):
            raise ValueError(f"turn {n}: {len(gen)} generated ids but {len(gen_lps)} log-probs")
        if list(prompt[: len(ids)]) != ids:
            raise ValueError(f"turn {n}: its prompt does not extend the previous turn's prompt + generation")
        glue = list(prompt[len(ids) :])
        ids += glue + list(gen)
        mask += [0] * len(glue) + [1] * len(gen)
        lps += [0.0] * len(glue) + [float(x) for x in gen_lps]
    tail = list(run["tau_tail_ids"])
    ids += tail
    mask += [0] * len(tail)
    lps += [0.0] * len(tail)
    if items and len(items[0]["prompt_token_ids"]) < prompt_len:
        raise ValueError(f"the first turn's prompt is shorter than tau_prompt_len={prompt_len}")
    reward = None if masked else run.get("reward")
    return RunTrajectory(
        tuple(ids[:prompt_len]),
        tuple(ids[prompt_len:]),
        tuple(mask[prompt_len:]),
        tuple(lps[prompt_len:]),
        None if reward is None else float(reward),
        str(run.get("tau_status", "")),
    )
