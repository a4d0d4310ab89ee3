"""What crosses the boundary between a front door and the process that plays its episode.

Both are plain picklable values: the request (``engine/episode/request.py``, the value every layer hands on) holds
what the trainer's sample says (its prompt, its metadata, the sampling parameters, its options with a suspended
episode's state as JSON-safe data) and no live object crosses with it; the reply holds the
result as the engine typed it, the trajectory the trainer stores and the decoded response, so the trainer's
process needs no tokenizer, no τ and no environment. Imports only engine values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.episode.request import EpisodeRequest, HeldTokens, tokens_digest
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.trajectory import Trajectory

__all__ = ["EpisodeRequest", "FinishedEpisode", "HeldTokens", "tokens_digest"]


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
