"""One engine, every trainer: the record each trainer's parity test compares with slime's ``generate``.

The trainers live in different venvs (verl's, TRL's, NeMo Gym's Python 3.12), so no single process can hold all of
them. Each trainer's suite plays :data:`PARITY_CASES` through its own front door, turns what the trainer would train
on into a :class:`ParityRecord`, and compares it with :func:`slime_record` of the same case, played in the same
process against the same oracle server: every trainer equals slime, so all equal each other. A new trainer's leg is
one small test: its record of each case, then :func:`assert_same`. Imports no trainer.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.envs import TaskRef
from tests.contracts.slime_sample import Sample
from tests.slime_args import slime_args

LOGPROB_TOL = 1e-6
"""Relative tolerance of a log-prob: a trainer that holds them as float32 tensors (verl, TRL) rounds them there."""


@dataclass(frozen=True, slots=True)
class ParityCase:
    """One episode every trainer plays: a task, a seed and ``tau_*`` settings (each trainer's own way to set them)."""

    name: str
    task: TaskRef
    seed: int = 1234
    """The sampling seed slime's and verl's legs send; TRL derives each copy's own from ``GRPOConfig.seed``. The
    oracle server samples nothing, so the records agree whatever the seed (a seed-sensitive server would need one)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """``tau_<name>: value``: slime's ``args.tau_<name>``, verl's ``+tau.<name>``, TRL's ``TauRollout(tau_<name>=)``."""

    @property
    def task_name(self) -> str:
        """``BENCHMARK/DOMAIN/SPLIT/TASK_ID``, as TRL's rows and every trainer's ``tau_task`` field write it."""
        t = self.task
        return f"{t.benchmark}/{t.domain}/{t.split}/{t.task_id}"


PARITY_SETS = (("tau2", "retail", "train"), ("tau2", "airline", "test"))
"""The task sets of the oracle server the parity tests play against."""
PARITY_CASES = (
    ParityCase("retail-short", TaskRef("tau2", "retail", "train", "57")),
    ParityCase("airline-tools", TaskRef("tau2", "airline", "test", "2")),
    ParityCase("retail-max-turns", TaskRef("tau2", "retail", "train", "0"), settings={"tau_max_turns": 2}),
    ParityCase("failed-no-such-task", TaskRef("tau2", "retail", "train", "no-such-task")),
)
"""A short completed episode, a τ² domain with several tool calls, an episode cut by a limit (``max_turns``), and a
FAILED one (a task τ does not have): no trainer trains on it (reward None, loss mask all 0)."""
EXPECTED_STATUS = {
    "retail-short": "completed",
    "airline-tools": "completed",
    "retail-max-turns": "truncated",
    "failed-no-such-task": "failed",
}


@dataclass(frozen=True, slots=True)
class ParityRecord:
    """What a trainer trains on for one episode, unpadded: prompt + response ids, and per response id its loss mask
    and log-prob; the reward it optimises and the episode's status."""

    tokens: tuple[int, ...]
    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    reward: float | None
    status: str

    @classmethod
    def of(
        cls,
        prompt_ids: Sequence[int],
        response_ids: Sequence[int],
        loss_mask: Sequence[int],
        logprobs: Sequence[float],
        reward: float | None,
        status: str,
    ) -> ParityRecord:
        """A record from plain sequences (lists, tensor ``tolist()``s); lengths are checked by :func:`assert_same`."""
        return cls(
            tuple(int(t) for t in [*prompt_ids, *response_ids]),
            tuple(int(m) for m in loss_mask),
            tuple(float(x) for x in logprobs),
            None if reward is None else float(reward),
            str(status),
        )

    @property
    def prompt_len(self) -> int:
        return len(self.tokens) - len(self.loss_mask)


def slime_record(server_url: str, tokenizer_dir: str, case: ParityCase) -> ParityRecord:
    """``case`` through slime's ``generate`` with the ``Sample`` stand-in (slime's ``append_response_tokens`` rules)."""
    ref = case.task
    args = slime_args(server_url, tokenizer_dir, tau_domain=ref.domain, tau_split=ref.split, **dict(case.settings))
    args.tau_record_messages = False
    row = task_row(0, ref)
    sample = Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"parity-{case.name}")
    params = {"temperature": 1.0, "top_p": 1.0, "no_stop_trim": True, "skip_special_tokens": False}
    asyncio.run(generate(args, sample, {**params, "sampling_seed": case.seed}))
    prompt = sample.tokens[: len(sample.tokens) - sample.response_length]
    response = sample.tokens[len(prompt) :]
    reward = None if sample.remove_sample else sample.reward
    return ParityRecord.of(prompt, response, sample.loss_mask, sample.rollout_log_probs, reward, sample.status.value)


def first_difference(a: ParityRecord, b: ParityRecord) -> str | None:
    """Where ``b`` first differs from ``a`` (a field and a position), or None when they are the same episode."""
    if a.status != b.status:
        return f"status {a.status!r} != {b.status!r}"
    if a.prompt_len != b.prompt_len:
        return f"prompt length {a.prompt_len} != {b.prompt_len} (response {len(a.loss_mask)} vs {len(b.loss_mask)})"
    for name in ("tokens", "loss_mask", "logprobs"):
        xs, ys = getattr(a, name), getattr(b, name)
        for i, (x, y) in enumerate(zip(xs, ys, strict=False)):
            same = math.isclose(x, y, rel_tol=LOGPROB_TOL, abs_tol=1e-9) if name == "logprobs" else x == y
            if not same:
                where = f"response position {i}" if name != "tokens" else _token_position(a, i)
                return f"{name} differ at {where}: {x!r} != {y!r}"
        if len(xs) != len(ys):
            return f"{name} lengths {len(xs)} != {len(ys)}"
    if (a.reward is None) != (b.reward is None) or (a.reward is not None and not math.isclose(a.reward, b.reward)):
        return f"reward {a.reward!r} != {b.reward!r}"
    return None


def _token_position(record: ParityRecord, i: int) -> str:
    return f"prompt position {i}" if i < record.prompt_len else f"response position {i - record.prompt_len}"


def assert_same(slime: ParityRecord, other: ParityRecord, trainer: str, case: ParityCase) -> None:
    """``other`` (``trainer``'s record of ``case``) is slime's episode, id for id; the message names the first
    difference."""
    difference = first_difference(slime, other)
    assert difference is None, f"{trainer} vs slime on {case.name} ({case.task_name}): {difference}"
