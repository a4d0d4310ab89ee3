"""The agent's uniform view of a τ environment, whatever τ version is underneath.

A backend turns a :class:`TaskRef` into an :class:`EnvSession` (one episode, its own fresh database).
Everything here is synchronous: the episode engine calls it through ``run_blocking``. Backends import
their τ package lazily, so this package imports without any τ installed.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.choices import NLAssertionMode, RewardMode, parse_choice
from slime_tau_plugin.engine.episode.task_ref import TaskRef

if TYPE_CHECKING:
    from slime_tau_plugin.engine.episode.result import TerminationReason

REWARD_METHODS: dict[RewardMode, str] = {RewardMode.FAST: "fast_reward", RewardMode.REFERENCE: "reference_reward"}
"""``tau_reward_mode`` -> the :class:`EnvSession` method that scores an episode: judging is apart from
running, and a new reward mode is one method per session plus one line here."""
STOP_MARKER = "###STOP###"
"""What τ's simulated user says to end the conversation (both τ versions; τ² adds transfer/out-of-scope)."""


@dataclass(frozen=True, slots=True)
class EnvToolCall:
    """A tool call the agent (or the simulated user) asks the environment to run."""

    name: str
    arguments: dict[str, Any]
    call_id: str


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a tool call returned."""

    content: str
    """The observation text the caller sees."""
    is_error: bool = False
    """The tool raised (bad arguments, failed precondition, unknown tool)."""
    is_done: bool = False
    """The call ended the episode (e.g. a transfer to a human agent)."""


@dataclass(frozen=True, slots=True)
class RewardResult:
    """τ's own reward for a finished episode, with its breakdown."""

    reward: float
    breakdown: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GoldAction:
    """One action of a task's reference solution (drives the oracle policy and scripted users)."""

    name: str
    arguments: dict[str, Any]
    requestor: str = "assistant"
    """``assistant`` or ``user`` (τ² telecom has user-side actions)."""


@dataclass(frozen=True, slots=True)
class TaskScript:
    """What a task asks and its reference solution (for scripted users and the oracle policy)."""

    user_instructions: str
    """The simulated user's opening message (the task's instruction)."""
    gold_actions: tuple[GoldAction, ...] = ()
    gold_outputs: tuple[str, ...] = ()
    """Strings the agent must tell the user for a full reward."""
    task_id: str = ""
    """τ's id of the task (τ² telecom tasks share instructions: only the id tells them apart)."""


class FirstMove(str, enum.Enum):
    """Who goes on from a task's message history (τ²'s orchestrator decides by its last message)."""

    AGENT = "agent"
    """It ends with the user's text or the answer to the agent's tool call: the model's turn."""
    USER = "user"
    """It ends with the agent's text or the answer to the user's tool call: the user speaks, then the model."""
    USER_STOPPED = "user_stopped"
    """It ends with the user's stop: the episode is over before the model's first turn (and scored)."""


@dataclass(frozen=True, slots=True)
class MessageHistory:
    """A task that begins mid-conversation (τ²'s ``initial_state.message_history``), as each side saw it."""

    agent_view: tuple[dict[str, Any], ...]
    """Chat messages after the agent's system prompt: in the model's first prompt (never trained on)."""
    user_view: tuple[dict[str, Any], ...]
    """The LLM user's messages after its system prompt, roles flipped (the user is the ``assistant``)."""
    first_move: FirstMove


@dataclass(frozen=True, slots=True)
class EnvOptions:
    """Per-run choices about how episodes are scored (same for every episode of a run)."""

    reward_mode: RewardMode = RewardMode.FAST
    """``fast``: cached gold outcome, same reward as τ's evaluation; ``reference``: τ's own evaluation."""
    nl_assertions: NLAssertionMode = NLAssertionMode.JUDGE
    """``judge``: NL assertions in a task's reward basis go to the judge; ``exclude``: left out (said in metadata)."""
    judge: Any = None
    """An ``LLMEndpoint`` for NL-assertion judging (τ³ tasks); None = τ's default judge."""
    retrieval_variant: str | None = None
    """``tau_retrieval_variant``: a τ³ knowledge domain's retrieval (banking_knowledge); None = τ's own default."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reward_mode", parse_choice(RewardMode, "reward_mode", self.reward_mode))
        object.__setattr__(self, "nl_assertions", parse_choice(NLAssertionMode, "nl_assertions", self.nl_assertions))


class EnvSession(ABC):
    """One episode's environment. Not thread-safe: one caller at a time."""

    tools: list[dict[str, Any]]
    """Agent tools as OpenAI function schemas."""
    agent_system_prompt: str
    """τ's domain rules for the agent (τ²'s policy, v1's wiki): the agent's system prompt."""
    user_tools: Sequence[dict[str, Any]] = ()
    """Tools the simulated user can run (τ² telecom's device tools); empty elsewhere."""
    user_stop_markers: tuple[str, ...] = (STOP_MARKER,)
    """Text that ends the episode when the simulated user says it (τ² also has transfer/out-of-scope)."""
    first_agent_message: str = "Hi! How can I help you today?"
    """The greeting τ's LLM user answers with its opening message (a task without history)."""
    history: MessageHistory | None = None
    """The conversation the task begins with (τ² ``message_history``); None: it starts from scratch."""

    @abstractmethod
    def step(self, call: EnvToolCall) -> StepResult:
        """Run an agent tool call against this episode's database."""

    @abstractmethod
    def record_message(self, role: str, content: str) -> None:
        """Record a plain assistant or user message (τ rewards inspect what the agent said)."""

    def tau_messages(self) -> list[dict[str, Any]]:
        """τ's own message log of the episode as JSON (what τ's evaluator scored: the agent's and the user's tool
        calls and answers, and every text message), for ``slime-tau export``; empty where τ keeps none (v1)."""
        return []

    def user_step(self, call: EnvToolCall) -> StepResult:
        """Run a user-side tool (τ² telecom); backends without user tools refuse."""
        return StepResult(f"Error: the user has no tool named {call.name!r}", is_error=True)

    def is_read_only(self, tool: str, *, by_user: bool = False) -> bool:
        """Whether τ marks ``tool`` (the user's with ``by_user``) as one that only reads (τ²'s ``ToolType.READ``).

        The scripted user runs such a check when the agent names it; the oracle probes with them. False
        where τ does not say (v1), so nothing extra runs there.
        """
        return False

    def required_writes(self) -> tuple[str, ...]:
        """The tools of the task's reference actions by the agent that τ classes as writes, one per action.

        What a customer must not stop before (``review/stops.py``). τ's own classification, never a list of ours:
        τ²'s ``ToolType.WRITE`` (and every reference action of a task whose ``reward_basis`` holds ``ACTION``: τ²
        then checks each was called, e.g. telecom's ``transfer_to_human_agents``); τ-bench v1 (no tool types) the
        reference actions that change its database. Empty where the backend cannot say (then no stop is judged
        premature).
        """
        return ()

    def required_user_writes(self) -> tuple[str, ...]:
        """The tools of the task's reference actions by the *customer* that τ classes as writes, one per action.

        τ² telecom's device fixes (``toggle_airplane_mode``, ``reseat_sim_card``...: ``Action.requestor ==
        "user"``, the user toolkit's ``ToolType.WRITE``), only those the customer has (a τ³ task may restrict its
        tools). A customer that stops instead of doing one stops before its task's write (``review/stops.py``).
        Empty where the customer has no tools (τ² retail and airline, τ-bench v1).
        """
        return ()

    def state_hash(self) -> str:
        """A hash of this episode's databases (the records it touched: ``copy_on_access.touched_hash``).

        A suspended episode stores it; replaying its action log on a fresh session must reach it again.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot be suspended: it has no state_hash")

    reward_mode: RewardMode = RewardMode.FAST
    """How :meth:`reward` scores this episode (the run's ``EnvOptions.reward_mode``)."""

    def reward(self, termination: TerminationReason) -> RewardResult:
        """The episode's reward by :attr:`reward_mode` (equal to τ's own evaluation); call once, at the end.

        Only terminations with ``is_scored`` earn a reward, as in τ.
        """
        return getattr(self, REWARD_METHODS[self.reward_mode])(termination)

    @abstractmethod
    def fast_reward(self, termination: TerminationReason) -> RewardResult:
        """The cached-gold-outcome reward: equal to :meth:`reference_reward`, in milliseconds."""

    @abstractmethod
    def reference_reward(self, termination: TerminationReason) -> RewardResult:
        """τ's own, uncached evaluation of the same episode (slow): the parity reference."""

    @abstractmethod
    def user_system_prompt(self, guidelines: str | None = None) -> str:
        """The LLM user's system prompt: τ's own user-simulator guidelines with this task's instruction.

        ``guidelines`` (``tau_user_guidelines_file``'s text) replaces τ's guidelines; the instruction stays where
        τ puts it, so what the customer is asked to do is the task's either way.
        """

    script: TaskScript
    """The task's instruction and reference solution."""


class EnvBackend(ABC):
    """Opens episodes and lists tasks for one τ version."""

    name: str

    @abstractmethod
    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> EnvSession:
        """A fresh episode for ``ref`` (its own database, reset to the task's initial state)."""

    @abstractmethod
    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        """All tasks of ``domain``/``split`` in τ's order; ConfigError for unknown names."""

    @abstractmethod
    def script(self, ref: TaskRef) -> TaskScript:
        """The task's instruction and reference solution, without building an environment."""

    @abstractmethod
    def task_dump(self, ref: TaskRef) -> dict[str, Any]:
        """The task as JSON, so a prepared row replays exactly even if τ's data changes later."""

    @abstractmethod
    def splits(self, domain: str) -> tuple[str, ...]:
        """The split names ``domain`` has."""

    def build_domain(self, domain: str, options: EnvOptions | None = None) -> None:  # noqa: B027 (optional hook)
        """Build what every episode of ``domain`` shares now, before any episode (a no-op where tasks did it).

        Raises:
            ConfigError: τ lists the domain but cannot build it, in one line naming the missing piece.
        """

    def package_version(self) -> dict[str, str]:
        """Which τ distribution and version is installed (recorded in each sample's metadata)."""
        return {}
