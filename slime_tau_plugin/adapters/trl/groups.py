"""Where a process's rows sit in TRL's global generation batch: GRPO groups that span processes, and their seeds.

TRL (1.16) builds one *global* generation batch: its ``RepeatSampler`` lists each prompt ``num_generations`` times
in a row, and accelerate's ``BatchSamplerShard`` hands process ``p`` the ``p``-th slice of ``per_device_train_batch_size
x steps_per_generation`` rows. A group of ``num_generations`` copies may therefore straddle processes (4 GPUs x 2
rows x G=8: each GPU holds 2 copies of one prompt). TRL gathers the rewards and normalizes them per group over the
global batch, then takes back its own slice (``process_index * len(prompts)``). This module reads the same
arithmetic: row ``i`` of process ``p`` is global row ``p * n + i``, its group ``row // G``, its copy ``row % G``.

Everything an episode takes from its place is derived from the global row, never from the process: its sampling
seed (so a batch played on 8 processes samples exactly what it samples on 1) and its group key (the same string on
every process holding part of the group: one group for ``tau_user_shared_opening`` and the failure guard).
Imports no TRL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RowPlace:
    """One row's place in the global generation batch."""

    row: int
    """Global row: ``process_index * rows_per_process + i``."""
    group: int
    """Global GRPO group: ``row // num_generations``."""
    copy: int
    """Copy of the prompt within its group: ``row % num_generations``."""


def process_of(trainer: Any) -> tuple[int, int]:
    """(process_index, num_processes) of the trainer's accelerator; (0, 1) without one."""
    accelerator = getattr(trainer, "accelerator", None)
    return int(getattr(accelerator, "process_index", 0)), int(getattr(accelerator, "num_processes", 1))


def row_places(prompts: Sequence[Any], process_index: int, num_processes: int, groups: int) -> list[RowPlace]:
    """Each local row's global place.

    Raises:
        ConfigError: no rows, a global batch that is not whole groups, or two rows of one group on this process
            holding different prompts (not TRL's ``RepeatSampler`` order).
    """
    n = len(prompts)
    if n == 0 or (n * num_processes) % groups:
        raise ConfigError(
            f"TRL passed {n} rows on each of {num_processes} processes: a global batch of {n * num_processes} rows "
            f"is not whole groups of num_generations={groups} (TRL's own check would refuse it)"
        )
    start = process_index * n
    places = [RowPlace(start + i, (start + i) // groups, (start + i) % groups) for i in range(n)]
    first: dict[int, int] = {}
    for i, place in enumerate(places):
        j = first.setdefault(place.group, i)
        if prompts[i] != prompts[j]:
            raise ConfigError(
                f"rows {j} and {i} of process {process_index} are copies {places[j].copy} and {place.copy} of group "
                f"{place.group} but hold different prompts: not TRL's RepeatSampler order (num_generations={groups})"
            )
    return places


def episode_seed(base: int, step: int, prompt: str, row: int) -> int:
    """The sampling seed of one global row: the same run seed, step, task and row always sample the same episode,
    on any number of processes; the copies of a prompt (different rows) never share one."""
    digest = hashlib.sha256(f"{base}/{step}/{prompt}/{row}".encode()).digest()
    return int.from_bytes(digest[:6], "big")  # < 2**48: exact in JSON, within SGLang's int64


def group_key(generation: str, place: RowPlace, prompt: str) -> str:
    """The GRPO group of a row, the same string on every process that holds part of it: the generation (run seed,
    step, call: the same on every process, new each time TRL generates), the global group and its prompt."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:12]
    return f"trl:{generation}:g{place.group}:{digest}"
