"""User simulators: the customer side of a τ episode.

A user simulator opens the conversation and answers each agent message; ``is_stop`` ends the episode
the way τ's ``###STOP###`` does. Simulators are async: an LLM user waits on the network for most of its
time, and thousands of them must wait together on slime's one event loop. Environment calls they make
(τ² telecom's device tools) go through the ``blocking`` runner the episode engine hands them.

- ``ScriptedUser`` needs no LLM: it states the task's instruction, carries out the task's user-side
  reference actions when the agent writes to it (and any read-only check of its phone the agent names),
  answers a fixed number of times, then stops. It makes CPU runs and tests deterministic; it is not a
  realistic customer.
- ``LLMUser`` is τ's user simulator on any OpenAI-compatible endpoint: τ's own system prompt for the
  task (``EnvSession.user_system_prompt``), roles flipped (the agent speaks as ``user``), user tools
  run against the episode's environment, τ's stop markers end the episode. With a ``group``
  (``tau_user_shared_opening``, training only) its first request is its GRPO group's, asked once
  (``shared_opening.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from slime_tau_plugin.engine.choices import UserKind
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs.base import STOP_MARKER, EnvSession, EnvToolCall, StepResult
from slime_tau_plugin.engine.errors import ConfigError, ResumeError, UserSimulatorError
from slime_tau_plugin.engine.net.endpoints import EndpointRole, GuardSettings
from slime_tau_plugin.engine.net.replicas import ReplicaSet
from slime_tau_plugin.engine.review.checks import GO_AHEAD
from slime_tau_plugin.engine.users.chat_client import ChatClient
from slime_tau_plugin.engine.users.request_cache import RequestCache

MAX_USER_TOOL_ROUNDS = 10
"""User tool calls in a row before the LLM user must answer the agent in words."""

Blocking = Callable[..., Awaitable[Any]]
"""``await blocking(fn, *args)`` runs synchronous τ code off the event loop."""


@dataclass(frozen=True, slots=True)
class UserTurn:
    """What the simulated user says next."""

    text: str
    is_stop: bool = False
    tool_rounds: int = 0
    """Tool-call messages the user sent before this text (τ² counts each, and each batch of answers, as a step)."""
    tool_errors: int = 0
    """Of the user's tool calls, those answered with an error (τ² counts them toward ``max_errors``)."""


class UserSimulator(Protocol):
    async def opening(self) -> UserTurn:
        """The first user message (after the task's message history, when it has one)."""

    async def reply(self, agent_message: str) -> UserTurn:
        """Answer one agent message."""

    def snapshot(self) -> dict[str, Any]:
        """The simulator's state as JSON (a suspended episode keeps it: ``episode/state.py``)."""

    def restore(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`snapshot` (the simulator was just built for the same task)."""

    def tool_outputs(self) -> tuple[str, ...]:
        """What the customer's own tools showed it (the review grounds the facts it states on them)."""


class ScriptedUser:
    """Deterministic user: instruction first, then user-side gold actions, then ``max_replies`` answers.

    Like τ's user, who grounds what it says about its device on tool results, it runs a read-only check
    of its own (``check_sim_status``) when the agent's message names one (that is not its next action),
    and says what it showed: the only way an agent can tell apart tasks that differ on the phone alone.
    """

    CONTINUE = GO_AHEAD
    """Its fixed answer; the review never counts repeats of it as a loop."""

    def __init__(self, session: EnvSession, blocking: Blocking, max_replies: int = 0) -> None:
        self.session = session
        self.blocking = blocking
        self.max_replies = max_replies
        self._replies = 0
        self._pending = [a for a in session.script.gold_actions if a.requestor == "user"]
        self._outputs: list[str] = []

    async def opening(self) -> UserTurn:
        return UserTurn(self.session.script.user_instructions)

    async def reply(self, agent_message: str) -> UserTurn:
        check = self._named_check(agent_message)
        if check is not None:
            return await self._run(check, {}, f"user-check-{len(self._pending)}")
        if self._pending:
            action = self._pending.pop(0)
            return await self._run(action.name, dict(action.arguments), f"user-{len(self._pending)}")
        if self._replies < self.max_replies:
            self._replies += 1
            return UserTurn(self.CONTINUE)
        return UserTurn(STOP_MARKER, is_stop=True)

    def snapshot(self) -> dict[str, Any]:
        return {"replies": self._replies, "pending": len(self._pending), "tool_outputs": list(self._outputs)}

    def restore(self, state: dict[str, Any]) -> None:
        pending = int(state.get("pending", len(self._pending)))
        if not 0 <= pending <= len(self._pending):
            raise ResumeError(f"resume: the scripted user has {len(self._pending)} actions, not {pending}")
        self._pending = self._pending[len(self._pending) - pending :]
        self._replies = int(state.get("replies", 0))
        self._outputs = [str(o) for o in state.get("tool_outputs", ())]

    def tool_outputs(self) -> tuple[str, ...]:
        return tuple(self._outputs)

    async def _run(self, name: str, arguments: dict[str, Any], call_id: str) -> UserTurn:
        result = await self.blocking(self.session.user_step, EnvToolCall(name, arguments, call_id))
        self._outputs.append(str(result.content))
        text = f"I did {name} as you asked. Result: {result.content}"
        return UserTurn(text, tool_rounds=1, tool_errors=int(result.is_error))

    def _named_check(self, agent_message: str) -> str | None:
        """The first read-only, argument-free user tool ``agent_message`` names, unless it is the next action."""
        following = self._pending[0].name if self._pending else None
        for tool in self.session.user_tools:
            function = tool.get("function") or {}
            name = function.get("name") or ""
            if not name or name == following or (function.get("parameters") or {}).get("required"):
                continue
            if re.search(rf"\b{re.escape(name)}\b", agent_message) and self.session.is_read_only(name, by_user=True):
                return name
        return None


class LLMUser:
    """τ's simulated customer, played by an LLM behind an OpenAI-compatible endpoint."""

    def __init__(
        self,
        session: EnvSession,
        blocking: Blocking,
        client: ChatClient,
        system_prompt: str,
        seed: int | None = None,
        group: str | None = None,
    ) -> None:
        self.session = session
        self.seed = seed
        """Sent with every request as OpenAI's ``seed``: the episode's ``sampling_seed`` (CLI ``--seed``)."""
        self.group = group
        """The GRPO group whose one opening request this episode shares (None: it asks its own)."""
        self.blocking = blocking
        self.client = client
        self.tools = list(session.user_tools) or None
        # The user's own view: it is the "assistant", the agent is its "user". A task that begins
        # mid-conversation gives it that conversation instead of τ's greeting, as τ²'s orchestrator does.
        greeting = ({"role": "user", "content": session.first_agent_message},)
        start = session.history.user_view if session.history is not None else greeting
        self.history: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}, *map(dict, start)]

    async def opening(self) -> UserTurn:
        return await self._speak(group=self.group)

    async def reply(self, agent_message: str) -> UserTurn:
        self.history.append({"role": "user", "content": agent_message})
        return await self._speak()

    def snapshot(self) -> dict[str, Any]:
        return {"history": list(self.history), "seed": self.seed}

    def restore(self, state: dict[str, Any]) -> None:
        history = state.get("history")
        if not isinstance(history, list) or not history or history[0] != self.history[0]:
            raise ResumeError("resume: the LLM user's stored history does not start with this task's prompt")
        self.history = list(history)
        self.seed = state.get("seed", self.seed)

    def tool_outputs(self) -> tuple[str, ...]:
        return tuple(str(m.get("content") or "") for m in self.history if m.get("role") == "tool")

    async def _speak(self, group: str | None = None) -> UserTurn:
        """Ask the LLM until it says something (running any user tools it calls on the way); ``group``: the first
        request is the group's shared one (user tools it calls then run on this episode's own environment)."""
        rounds = errors = 0
        for _ in range(MAX_USER_TOOL_ROUNDS):
            message = await self.client.complete(self.history, self.tools, seed=self.seed, group=group)
            group = None
            calls = message.get("tool_calls") or []
            content = message.get("content") or ""
            if calls and self.tools:
                self.history.append({"role": "assistant", "content": content or None, "tool_calls": calls})
                rounds += 1
                for call in calls:
                    result = await self._run_tool(call)
                    errors += int(result.is_error)
                    self.history.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result.content})
                continue
            if not content.strip():
                raise UserSimulatorError("the user simulator answered with an empty message")
            self.history.append({"role": "assistant", "content": content})
            is_stop = any(m in content for m in self.session.user_stop_markers)
            return UserTurn(content, is_stop, tool_rounds=rounds, tool_errors=errors)
        raise UserSimulatorError(f"the user simulator made {MAX_USER_TOOL_ROUNDS} rounds of tool calls in a row")

    async def _run_tool(self, call: dict[str, Any]) -> StepResult:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            return StepResult(f"Error: arguments are not valid JSON: {function.get('arguments')!r}", is_error=True)
        env_call = EnvToolCall(str(function.get("name", "")), arguments, str(call.get("id", "")))
        return await self.blocking(self.session.user_step, env_call)


async def _scripted(
    config: TauConfig,
    session: EnvSession,
    blocking: Blocking,
    client: ChatClient | None,
    seed: int | None = None,
    group: str | None = None,
) -> UserSimulator:
    return ScriptedUser(session, blocking, config.scripted_user_replies)  # its opening is the same text anyway


async def _llm(
    config: TauConfig,
    session: EnvSession,
    blocking: Blocking,
    client: ChatClient | None,
    seed: int | None = None,
    group: str | None = None,
) -> UserSimulator:
    if client is None:
        raise ConfigError("tau_user=llm needs tau_user_base_url and tau_user_model")
    shared = group if config.user_shared_opening else None
    guidelines = config.user_guidelines()
    prompt = await blocking(session.user_system_prompt, guidelines.text if guidelines is not None else None)
    return LLMUser(session, blocking, client, prompt, seed, shared)


USER_SIMULATORS: dict[UserKind, Callable[..., Awaitable[UserSimulator]]] = {
    UserKind.SCRIPTED: _scripted,
    UserKind.LLM: _llm,
}
"""``tau_user`` -> the builder of that simulator: ``(config, session, blocking, client, seed, group)``. A new
simulator is a class here (``opening``/``reply``), a ``UserKind`` member and one line in this table."""


async def make_user(
    config: TauConfig,
    session: EnvSession,
    blocking: Blocking,
    client: ChatClient | None = None,
    seed: int | None = None,
    group: str | None = None,
) -> UserSimulator:
    """The user simulator ``tau_user`` names, for one episode (``seed``: the LLM user's per-request seed;
    ``group``: the trainer's GRPO group of the episode, whose opening it shares when ``tau_user_shared_opening``)."""
    return await USER_SIMULATORS[config.user](config, session, blocking, client, seed, group)


def user_client(config: TauConfig) -> ChatClient | None:
    """The shared HTTP client for the config's LLM user (None for the scripted user): its replicas (one per URL
    of ``tau_user_base_url``), each behind the process's guard for it (``tau_user_max_inflight``,
    ``tau_outage_tolerance_s``), the user's token budget and its exact-request cache (``tau_user_cache_size``)."""
    endpoint = config.user_endpoint()
    if endpoint is None:
        return None
    settings = GuardSettings(config.user_max_inflight, config.outage_tolerance_s)
    replicas = ReplicaSet.for_urls(EndpointRole.USER, endpoint.urls, settings)
    cache = RequestCache(config.user_cache_size) if config.user_cache_size > 0 else None
    return ChatClient(endpoint, what="user simulator", replicas=replicas, budget=config.user_token_budget, cache=cache)
