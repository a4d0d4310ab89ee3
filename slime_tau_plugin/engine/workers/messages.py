"""What crosses the boundary between a front door and the process that plays its episode.

Both are plain picklable values: the request holds what the trainer's sample says (its prompt, its metadata, the
sampling parameters, a suspended episode's state as JSON-safe data) and never a live object; the reply holds the
result as the engine typed it, the trajectory the trainer stores and the decoded response, so the trainer's
process needs no tokenizer, no τ and no environment. Imports only engine values.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.trajectory import Trajectory


def tokens_digest(ids: Sequence[int]) -> str:
    """A short digest of a token list: the trainer's process proves what its sample holds without sending it."""
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class HeldTokens:
    """What the trainer's sample holds when it hands back a suspended episode (checked against the state)."""

    count: int
    digest: str

    @classmethod
    def of(cls, ids: Sequence[int]) -> HeldTokens:
        return cls(len(ids), tokens_digest(ids))


@dataclass(frozen=True, slots=True)
class EpisodeRequest:
    """One episode to play, as the trainer's sample and call describe it."""

    request_id: str
    prompt: Any
    """The sample's prompt (a task position, or anything ``data.task_ref_from_sample`` reads)."""
    metadata: dict[str, Any]
    """The sample's metadata without the suspended state (which is :attr:`state`)."""
    sampling_params: dict[str, Any]
    session_id: str | None = None
    headers: dict[str, str] | None = None
    state: dict[str, Any] | None = None
    """A suspended episode to resume (``EpisodeState.to_json()``), or None to start fresh."""
    held: HeldTokens | None = None
    """With :attr:`state`: the tokens the trainer's sample holds, which must be the state's."""
    suspend: bool = False
    """Leave a resumable state if the trainer aborts the episode (slime's ``--partial-rollout``)."""
    group: str | None = None
    """The sample's GRPO group in training (slime's ``group_index``, TRL's copies of a prompt); None in evaluation.
    Worker pools send a group's requests to one worker, and its customer's opening is shared
    (``tau_user_shared_opening``)."""


@dataclass(frozen=True, slots=True)
class FinishedEpisode:
    """A played episode as every front door fills its sample from it."""

    result: EpisodeResult
    trajectory: Trajectory
    """What the trainer stores: ``outcome.trainable_trajectory`` (never empty; no trainable id if it must not
    train; a suspended episode's as it is)."""
    response_text: str
    """The response ids decoded (special tokens kept)."""
    kept_segments: int = 0
    """Segments of :attr:`trajectory` the trainer's sample already holds (a resumed episode's earlier steps)."""
    worker: dict[str, Any] = field(default_factory=dict)
    """Where it ran (``tau_worker``) and whether a worker died under it: filled by the pool, empty in-process."""
