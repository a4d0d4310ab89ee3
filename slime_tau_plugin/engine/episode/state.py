"""An unfinished episode as a value: what a suspended episode leaves behind, JSON-safe, to resume anywhere.

slime's ``--partial-rollout`` and its fully-async worker stop episodes at a step's end and hand the same
sample back a step later, possibly to another process. Nothing live (an environment, an HTTP session, a
user simulator object) can travel that way, so a suspended episode becomes an :class:`EpisodeState`:

- the trajectory as stored (prompt ids, segments with ids, log-probs, trainability and the weight version
  that sampled each model segment), and how many trailing model ids belong to a turn cut mid-generation;
- the conversation, the counters and τ²'s step ledger, the template mode;
- the ordered log of every environment call (agent tools, user tools, recorded messages) with its answer,
  and the hash of the records the episode touched (``EnvSession.state_hash``) once they were made;
- the user simulator's own state (``UserSimulator.snapshot``).

Resuming (``resume.py``) replays the log on a fresh environment, checks every answer and the hash, and
refuses a state that does not lead to the same world (:class:`errors.ResumeError`). The model is validated
by pydantic on the way in, so a truncated or hand-edited state is refused with the field it broke. Imports
only ``trajectory`` and ``task_ref``; no trainer, no τ.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import ResumeError

STATE_VERSION = 1
"""Bumped when a field changes meaning; a state of another version is refused, never guessed at."""
METADATA_KEY = "tau_episode_state"
"""Where trainers keep the state next to a sample (slime's ``sample.metadata``, verl's ``extra_fields``)."""


class ActionKind(str, enum.Enum):
    """Which ``EnvSession`` method a logged call went to."""

    AGENT = "agent"
    """``step``: an agent tool call."""
    USER = "user"
    """``user_step``: a user-side tool call (τ² telecom's device tools)."""
    MESSAGE = "message"
    """``record_message``: a plain agent or user message (``name`` is the role)."""


class LoggedAction(BaseModel):
    """One environment call and what it answered (the answer is checked when the call is replayed)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ActionKind
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str = ""
    content: str = ""
    is_error: bool = False
    is_done: bool = False


class SegmentState(BaseModel):
    """A trajectory segment as stored (SGLang's ``meta_info`` stays with the trainer's own sample)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ids: tuple[int, ...]
    log_probs: tuple[float, ...]
    trainable: bool
    weight_version: str | None = None
    """The policy weights that sampled a trainable segment (SGLang's ``meta_info.weight_version``)."""


class EpisodeState(BaseModel):
    """Everything a suspended episode needs to go on, and nothing live."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = STATE_VERSION
    benchmark: str
    domain: str
    split: str
    task_id: str
    task: dict[str, Any] | None = None
    """The task's own dump when the row carried one (``slime-tau prepare``)."""
    prompt_ids: tuple[int, ...] = Field(min_length=1)
    segments: tuple[SegmentState, ...] = ()
    open_turn_ids: int = Field(0, ge=0)
    """Trailing model ids of a turn cut mid-generation (0 at a turn boundary): the turn goes on from them."""
    messages: tuple[dict[str, Any], ...]
    num_turns: int = Field(ge=0)
    counters: dict[str, int] = Field(default_factory=dict)
    steps: int = Field(0, ge=0)
    errors: int = Field(0, ge=0)
    actions: tuple[LoggedAction, ...] = ()
    env_hash: str
    user: dict[str, Any] = Field(default_factory=dict)
    template_mode: str
    active_s: float = Field(0.0, ge=0)
    """Wall time the episode has been playing, suspensions excluded (its deadline counts only this)."""
    policy_s: float = 0.0
    env_s: float = 0.0
    user_s: float = 0.0
    net_retries: int = 0
    customer_cost: dict[str, Any] = Field(default_factory=dict)
    """What the customer cost before this suspension (``CustomerCost.as_metadata``): a resume adds to it."""
    suspensions: int = Field(0, ge=0)
    """How many times the episode was suspended before this state (this one included)."""
    turns_before: int = Field(0, ge=0)
    """Policy turns played before the latest suspension (what a resume reuses)."""

    @property
    def task_ref(self) -> TaskRef:
        return TaskRef(self.benchmark, self.domain, self.split, self.task_id, self.task)

    def trajectory(self) -> Trajectory:
        """The stored trajectory, ready to append to (weight versions ride in each segment's ``meta_info``)."""
        traj = Trajectory(self.prompt_ids)
        for seg in self.segments:
            if seg.trainable:
                meta = None if seg.weight_version is None else {"weight_version": seg.weight_version}
                traj.add_model_turn(seg.ids, seg.log_probs, meta)
            else:
                traj.add_continuation(seg.ids)
        return traj

    def to_json(self) -> dict[str, Any]:
        """A plain JSON object (what trainers store)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Any) -> EpisodeState:
        """Validate a stored state (a dict or its JSON text).

        Raises:
            ResumeError: not a state of this version, naming the first field that is wrong.
        """
        if isinstance(data, (str, bytes)):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ResumeError(f"{METADATA_KEY} is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ResumeError(f"{METADATA_KEY} must be a JSON object, got {type(data).__name__}")
        if data.get("version") != STATE_VERSION:
            raise ResumeError(
                f"{METADATA_KEY} has version {data.get('version')!r}; this plugin resumes version {STATE_VERSION} only"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise ResumeError(f"{METADATA_KEY}.{where}: {first['msg']}") from exc


def segment_states(traj: Trajectory) -> tuple[SegmentState, ...]:
    """The trajectory's segments as state (each model segment keeps the weight version that sampled it)."""
    return tuple(
        SegmentState(ids=s.ids, log_probs=s.log_probs, trainable=s.is_trainable, weight_version=s.weight_version)
        for s in traj.segments
    )
