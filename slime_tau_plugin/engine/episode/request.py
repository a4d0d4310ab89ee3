"""One episode as a trainer's door asks for it: :class:`EpisodeRequest`, with its :class:`EpisodeOptions`.

The door writes the request once (slime's ``generate``, verl's agent loop, TRL's ``rollout_func``, NeMo Gym's
``/run``, the CLI) and the same value travels to the turn loop: the failure boundary reads its task and its
suspended state, a worker pool routes it by group and sends it to another process, the engine plays it and the
turn loop reads its options between turns. The six options are written here and nowhere else; the layers hand
the value on (``dataclasses.replace`` where one of them learns more: the loaded state, a worker's abort flag).

Both are frozen and picklable: a request crosses to a worker process or a Ray actor. The abort check is the only
live part, and it never crosses: it is the asking process's (see :meth:`EpisodeOptions.__reduce__`).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.errors import ResumeError

AbortCheck = Callable[[], bool]
"""Asked between turns: True when the trainer no longer wants this episode (slime's rollout abort)."""


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
class StoredState:
    """A suspended episode as the trainer's sample keeps it: the state's JSON-safe data (``EpisodeState.to_json``)
    and, when the door knows them, the tokens the sample holds. Read inside the failure boundary (:meth:`load`), so
    a state that no longer fits is a FAILED episode, never an exception into the trainer."""

    data: Any
    held: HeldTokens | None = None

    def load(self) -> EpisodeState:
        """The suspended episode, checked against the tokens the trainer's sample holds.

        Raises:
            ResumeError: the state is malformed, or the sample no longer holds the tokens it names.
        """
        state = EpisodeState.from_json(self.data)
        if self.held is not None:
            stored = HeldTokens.of([*state.prompt_ids, *(t for seg in state.segments for t in seg.ids)])
            if stored != self.held:
                raise ResumeError(
                    f"resume: the sample holds {self.held.count} tokens, not the {stored.count} its suspended "
                    "episode left (something rewrote sample.tokens between steps)"
                )
        return state


@dataclass(frozen=True, slots=True)
class EpisodeOptions:
    """How one episode plays, besides its task and sampling parameters: the options every layer reads, written once."""

    session_id: str | None = None
    """The trainer's id for the episode: the policy's request ids are ``{session_id}-{turn}`` (a random one if None)."""
    headers: dict[str, str] | None = None
    """Sent with every policy request (slime's ``X-SMG-Routing-Key`` under consistent-hashing routing)."""
    should_abort: AbortCheck | None = None
    """Asked between turns (slime's rollout abort; a worker's forwarded flag). It stays in the process that set it."""
    resume: EpisodeState | StoredState | None = None
    """A suspended episode to go on from (the task is then the state's), as the engine holds it or as the sample
    stored it; None starts fresh."""
    suspend: bool = False
    """An episode the trainer aborts leaves its resumable state in ``EpisodeResult.state`` (slime's
    ``--partial-rollout``)."""
    group: str | None = None
    """The sample's GRPO group in training (slime's ``group_index``, TRL's copies of a prompt); None in evaluation.
    Worker pools send a group's requests to one worker, and its customer's opening is shared
    (``tau_user_shared_opening``)."""

    def state(self) -> EpisodeState | None:
        """The :class:`EpisodeState` to resume, a stored one read and checked (``ResumeError``)."""
        return self.resume.load() if isinstance(self.resume, StoredState) else self.resume

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled without :attr:`should_abort`: a live check belongs to the process that asks (a worker sets its own
        flag, which the pool's watcher raises), and a trainer's closure must never be run in another process."""
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "should_abort"}
        return (_options, (kept,))


def _options(kept: dict[str, Any]) -> EpisodeOptions:
    return EpisodeOptions(**kept)


@dataclass(frozen=True, slots=True)
class EpisodeRequest:
    """One episode to play, as the trainer's sample and call describe it: the one value from the door to the turn
    loop."""

    request_id: str
    prompt: Any
    """The sample's prompt (a task position, or anything ``data.task_ref_from_sample`` reads)."""
    metadata: dict[str, Any]
    """The sample's metadata without the suspended state (which is ``options.resume``)."""
    sampling_params: dict[str, Any]
    options: EpisodeOptions = EpisodeOptions()

    def with_abort(self, check: AbortCheck | None) -> EpisodeRequest:
        """The same request asked between turns by ``check`` (a worker's own abort flag)."""
        return replace(self, options=replace(self.options, should_abort=check))
