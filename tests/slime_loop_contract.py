"""slime 624b824's rollout contracts the slime hooks rely on, for tests that run without slime.

:func:`draw_step` is ``generate_rollout_async``'s accounting of one step (``slime/rollout/sglang_rollout.py``):
draw ``over_sampling_batch_size`` groups while fewer than ``rollout_batch_size`` candidates are left, ask the dynamic
filter about each finished group, drop it by ``should_drop_dynamic_filter_output``. :func:`train_data` is
``RolloutManager._convert_samples_to_train_data``'s order (``slime/ray/rollout.py``): the reward post-process is
called on the step's samples, then their loss masks and rollout log-probs are read. Where slime is importable its
own functions are used; else these restatements (the tests assert behaviour, not these lines).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


def _should_drop(output: Any, remaining: int, target: int) -> bool:
    try:
        from slime.rollout.filter_hub.base_types import should_drop_dynamic_filter_output
    except ImportError:
        if getattr(output, "keep", output):
            return False
        return not (getattr(output, "keep_when_insufficient", False) and remaining <= target)
    return should_drop_dynamic_filter_output(output, remaining_batch_size=remaining, target_data_size=target)


@dataclass
class Step:
    """What one step did: batches drawn, groups kept (in finishing order), groups dropped."""

    batches: int = 0
    kept: list[list[Any]] = field(default_factory=list)
    dropped: int = 0


def draw_step(args: Any, keep: Callable[..., Any], groups: Iterator[list[Any]], max_groups: int = 10_000) -> Step:
    """One step of slime's loop with groups finishing in draw order; stops at ``max_groups`` (an unbounded loop)."""
    target, over = args.rollout_batch_size, args.over_sampling_batch_size
    step, remaining, pending = Step(), 0, []
    while len(step.kept) < target:
        while remaining < target:
            if step.batches * over >= max_groups:
                return step
            step.batches += 1
            pending += [next(groups) for _ in range(over)]
            remaining += over
        group = pending.pop(0)
        if _should_drop(keep(args, group), remaining, target):
            step.dropped += 1
            remaining -= 1
            continue
        step.kept.append(group)
    return step


def first_round(args: Any) -> int:
    return math.ceil(args.rollout_batch_size / args.over_sampling_batch_size)


def set_rollout_id(monkeypatch: Any, rollout_id: int) -> None:
    """What ``RolloutManager.generate`` does first: slime's ``set_current_rollout_id`` (a stand-in module without
    slime: the external seam the hooks read)."""
    try:
        from slime.rollout.sample_hooks import set_current_rollout_id
    except ImportError:
        monkeypatch.setitem(sys.modules, "slime.rollout.sample_hooks", SimpleNamespace(_current_rollout_id=rollout_id))
        return
    set_current_rollout_id(rollout_id)


def train_data(args: Any, samples: list[Any]) -> dict[str, list[Any]]:
    """The loss masks and rollout log-probs slime trains on, after its reward post-process
    (``args.custom_reward_post_process_path``, or none) ran on ``samples``."""
    module, _, name = (getattr(args, "custom_reward_post_process_path", None) or "").rpartition(".")
    hook = getattr(importlib.import_module(module), name) if module else None
    try:
        from slime.ray import rollout
    except ImportError:
        if hook is not None:
            hook(args, samples)
        masks = []
        for sample in samples:
            if sample.loss_mask is None:
                sample.loss_mask = [1] * sample.response_length
            if sample.remove_sample:
                sample.loss_mask = [0] * sample.response_length
            masks.append(sample.loss_mask)
        return {"loss_masks": masks, "rollout_log_probs": [s.rollout_log_probs for s in samples]}
    from slime.utils.types import Sample

    # slime's own Sample (the stand-in lacks fields slime reads, e.g. train_metadata); the masks and metadata
    # are the same list and dict objects, so the post-process's writes reach the caller's samples too
    samples = [Sample(**{f.name: getattr(s, f.name) for f in dataclasses.fields(s)}) for s in samples]
    manager = getattr(rollout.RolloutManager, "__ray_actor_class__", rollout.RolloutManager)
    state = SimpleNamespace(
        args=args, custom_reward_post_process_func=hook, custom_convert_samples_to_train_data_func=None
    )
    state._post_process_rewards = lambda s: manager._post_process_rewards(state, s)
    return manager._convert_samples_to_train_data(state, samples)
