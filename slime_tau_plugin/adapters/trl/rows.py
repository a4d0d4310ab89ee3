"""τ tasks <-> TRL dataset rows, without importing TRL.

TRL hands a ``rollout_func`` only the rows' ``prompt`` values, so the prompt *is* the task's name, as text::

    {"prompt": "tau2/retail/train/7"}        # BENCHMARK/DOMAIN/SPLIT/TASK_ID (τ-bench v1: the task index)

The episode builds its own prompt (system policy, tools, first user message) from the task; TRL's own chat
template never sees this text. A text prompt (not a chat list) keeps TRL from templating it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import metadata_from_name, require_benchmark
from slime_tau_plugin.engine.envs import TaskRef


def task_name(ref: TaskRef) -> str:
    """``BENCHMARK/DOMAIN/SPLIT/TASK_ID``: the prompt of a TRL row."""
    return f"{ref.benchmark}/{ref.domain}/{ref.split}/{ref.task_id}"


def trl_rows(refs: Iterable[TaskRef]) -> list[dict[str, Any]]:
    """TRL dataset rows for ``refs``, in order (``datasets.Dataset.from_list(trl_rows(...))``)."""
    return [{"prompt": task_name(ref)} for ref in refs]


def task_request(prompt: Any, config: TauConfig) -> tuple[Any, dict[str, Any]]:
    """(prompt, metadata) as the engine's ``EpisodeRequest`` takes them, for a row's prompt.

    Raises:
        ConfigError: the prompt is not ``BENCHMARK/DOMAIN/SPLIT/TASK_ID`` text, names an unknown task set, or
            another benchmark than ``tau_benchmark`` (the engine plays one benchmark per config: a τ-bench v1 row
            would otherwise reach the τ² environment).
    """
    metadata = metadata_from_name(prompt, config, "TRL prompt")
    require_benchmark(metadata["benchmark"], config, f"TRL prompt {prompt.strip()!r}")  # before any episode
    return None, metadata
