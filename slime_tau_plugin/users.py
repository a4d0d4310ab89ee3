"""User simulators: the customer side of a τ episode.

A user simulator opens the conversation and answers each agent message; ``is_stop`` ends the episode
the way τ's ``###STOP###`` does. Simulators are synchronous (they run through ``run_blocking``).

``ScriptedUser`` needs no LLM: it states the task's instruction, carries out the task's user-side
reference actions when the agent writes to it (τ² telecom's device actions), answers a fixed number
of times, then stops. It makes CPU runs and tests deterministic; it is not a realistic customer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .envs.base import EnvSession, EnvToolCall
from .errors import ConfigError

STOP_MARKER = "###STOP###"


@dataclass(frozen=True, slots=True)
class UserTurn:
    """What the simulated user says next."""

    text: str
    is_stop: bool = False


class UserSimulator(Protocol):
    def opening(self) -> str:
        """The first user message."""

    def reply(self, agent_message: str) -> UserTurn:
        """Answer one agent message."""


class ScriptedUser:
    """Deterministic user: instruction first, then user-side gold actions, then ``max_replies`` answers."""

    CONTINUE = "Yes, please go ahead and complete everything I asked for with the details I gave you."

    def __init__(self, session: EnvSession, max_replies: int = 0) -> None:
        self.session = session
        self.max_replies = max_replies
        self._replies = 0
        self._pending = [a for a in session.script.gold_actions if a.requestor == "user"]

    def opening(self) -> str:
        return self.session.script.user_instructions

    def reply(self, agent_message: str) -> UserTurn:
        if self._pending:
            action = self._pending.pop(0)
            call = EnvToolCall(action.name, dict(action.arguments), f"user-{len(self._pending)}")
            result = self.session.user_step(call)
            return UserTurn(f"I did {action.name} as you asked. Result: {result.content}")
        if self._replies < self.max_replies:
            self._replies += 1
            return UserTurn(self.CONTINUE)
        return UserTurn(STOP_MARKER, is_stop=True)


def make_user(kind: str, session: EnvSession, *, scripted_replies: int = 0) -> UserSimulator:
    """The user simulator named by config (``tau_user``)."""
    if kind == "scripted":
        return ScriptedUser(session, scripted_replies)
    raise ConfigError(f"tau_user={kind!r} is unknown; expected one of scripted")
