"""``verify``'s verdict on one stored sample: log-prob gaps per turn, missing log-probs, mask errors.

Pure Python (no torch): the teacher-forced log-probs come in as numbers. A *turn* is one run of trainable
(mask 1) response tokens: the model's own ids of one assistant turn. The mask checks use only the chat
template's end-of-turn id and generation prompt, so they hold for any template:

- every turn follows the generation prompt (``<|im_start|>assistant\\n`` for Qwen): a turn that starts one
  token late or early does not;
- every turn but the last ends with the end-of-turn id, and no turn holds it before its end (a mask-1 token
  inside a tool/user message); the last turn may stop short only when the episode ended on length or abort.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CUT_SHORT = frozenset({"length", "aborted", "context_length", "budget_exhausted", "policy_error"})
"""Termination reasons after which the last turn may lack its end-of-turn id."""


@dataclass(frozen=True, slots=True)
class TemplateMarks:
    """What the mask checks need from the chat template."""

    eot_id: int
    generation_prompt: tuple[int, ...]  # ids the template writes before every assistant turn's content


@dataclass(frozen=True, slots=True)
class SampleCheck:
    """One sample's verdict (a row of ``verify``'s table)."""

    index: int  # position in samples.jsonl
    task: str
    trial: int | None
    turns: int  # runs of trainable tokens
    trainable: int
    compared: int  # trainable tokens with a stored log-prob
    max_abs: float  # max |rollout - teacher-forced| over compared tokens (0 when none)
    mean_abs: float
    first_turn_over: int | None  # 1-based turn of the first token over the tolerance
    missing_log_probs: int  # trainable tokens without a finite stored log-prob
    mask_errors: tuple[str, ...]
    text_drift: int | None = None  # response position where the decoded ids depart from the template (-1: prompt)

    def is_ok(self) -> bool:
        return self.first_turn_over is None and not self.missing_log_probs and not self.mask_errors


def trainable_runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of mask-1 response positions, in order."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


def mask_errors(
    response: Sequence[int], prompt: Sequence[int], mask: Sequence[int], marks: TemplateMarks, termination: str
) -> list[str]:
    """The mask errors of one sample, each naming the turn and response position (empty when none)."""
    errors: list[str] = []
    runs = trainable_runs(mask)
    before = list(prompt)
    gp = sample_generation_prompt(before, list(marks.generation_prompt))
    for turn, (start, end) in enumerate(runs, start=1):
        preceding = (before + list(response[:start]))[-len(gp) :] if gp else []
        if preceding != gp:
            errors.append(f"turn {turn} (response position {start}) does not follow the generation prompt")
        inner = [i for i in range(start, end - 1) if response[i] == marks.eot_id]
        if inner:
            errors.append(f"turn {turn} holds the end-of-turn id at response position {inner[0]}, before its end")
        is_last = turn == len(runs)
        if response[end - 1] != marks.eot_id and not (is_last and termination in CUT_SHORT):
            errors.append(f"turn {turn} ends at response position {end - 1} without the end-of-turn id")
    return errors


def sample_generation_prompt(prompt: list[int], rendered: list[int], slack: int = 16) -> list[int]:
    """The generation prompt this sample's prompt really ends with.

    The template rendered without the rollout's template kwargs gives ``<|im_start|>assistant\n``; a rollout
    with, e.g., Qwen3's ``enable_thinking=False`` ends its prompt with that plus ``<think>\n\n</think>\n\n``.
    So the last occurrence of the rendered ids within ``slack`` ids of the prompt's end, and all after it, is
    what every turn must follow; otherwise the rendered ids.
    """
    n = len(rendered)
    if not n:
        return []
    for start in range(len(prompt) - n, max(len(prompt) - n - slack, -1), -1):
        if prompt[start : start + n] == rendered:
            return prompt[start:]
    return rendered


def compare_sample(
    *,
    index: int,
    task: str,
    trial: int | None,
    mask: Sequence[int],
    rollout: Sequence[float] | None,
    teacher: Sequence[float],
    tolerance: float,
    errors: Sequence[str],
    text_drift: int | None = None,
) -> SampleCheck:
    """Compare stored and teacher-forced log-probs (``teacher`` holds one per trainable position, in order)."""
    runs = trainable_runs(mask)
    gaps: list[float] = []
    missing = 0
    first_over = None
    k = 0
    for turn, (start, end) in enumerate(runs, start=1):
        for i in range(start, end):
            stored = rollout[i] if rollout is not None else None
            if stored is None or not math.isfinite(stored):
                missing += 1
            else:
                gap = abs(stored - teacher[k])
                gaps.append(gap)
                if gap > tolerance and first_over is None:
                    first_over = turn
            k += 1
    return SampleCheck(
        index=index,
        task=task,
        trial=trial,
        turns=len(runs),
        trainable=k,
        compared=len(gaps),
        max_abs=max(gaps, default=0.0),
        mean_abs=sum(gaps) / len(gaps) if gaps else 0.0,
        first_turn_over=first_over,
        missing_log_probs=missing,
        mask_errors=tuple(errors),
        text_drift=text_drift,
    )
