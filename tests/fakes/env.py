"""FakeEnvBackend / FakeEnvSession: a τ package behind ``envs.base`` (see ``tests.fakes``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.envs.base import (
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    GoldAction,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)
from slime_tau_plugin.engine.episode.result import TerminationReason


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    params = {"type": "object", "properties": {k: {"type": "string", "description": v} for k, v in properties.items()}}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


FAKE_TOOLS: list[dict[str, Any]] = [
    _tool("get_order", "Look up an order.", order_id="Order id, e.g. #1."),
    _tool("cancel_order", "Cancel a pending order.", order_id="Order id, e.g. #1."),
    _tool("transfer_to_human_agents", "Hand over to a human; ends the conversation.", summary="What happened."),
]
"""The agent's tools, as OpenAI function schemas."""

FAKE_ORDERS: dict[str, dict[str, str]] = {
    "#1": {"status": "pending", "item": "lamp"},
    "#2": {"status": "delivered", "item": "desk"},
}
"""Each session's initial database (copied per session)."""

FAKE_INSTRUCTION = "Please cancel my order #1."
FAKE_ENV_INFO = {"tau_package": "fake-tau", "tau_version": "0.0"}


@dataclass(frozen=True, slots=True)
class EnvFaults:
    """Failures a :class:`FakeEnvBackend` injects; all off by default."""

    raising_tool: str | None = None
    """A tool (agent or user side) whose step raises ``RuntimeError``: a τ failure, unlike an error result."""
    step_delay_s: float = 0.0
    """Every step sleeps this long first (longer than ``tau_env_timeout_s``: a timeout)."""
    reward_raises: bool = False
    open_raises: bool = False
    script_raises: bool = False
    """Reading the task's script raises: the scripted user fails before the episode starts."""
    record_raises: bool = False
    """``record_message`` raises (τ² builds a pydantic message there)."""
    user_actions: tuple[GoldAction, ...] = ()
    """The task's user-side reference actions, which ``ScriptedUser`` runs through ``user_step``."""


class FakeEnvSession(EnvSession):
    """One episode over a private copy of :data:`FAKE_ORDERS`; records every call the engine makes."""

    agent_system_prompt = "You are a store agent. Cancel an order only when its owner asks."

    def __init__(self, ref: TaskRef, faults: EnvFaults) -> None:
        self.ref, self.faults = ref, faults
        self.tools = [dict(t) for t in FAKE_TOOLS]
        self.db = {k: dict(v) for k, v in FAKE_ORDERS.items()}
        self.steps: list[EnvToolCall] = []
        self.user_steps: list[EnvToolCall] = []
        self.recorded: list[tuple[str, str]] = []
        self.reward_calls: list[TerminationReason] = []
        self._script = TaskScript(FAKE_INSTRUCTION, faults.user_actions, task_id=ref.task_id)

    @property
    def script(self) -> TaskScript:  # type: ignore[override]
        if self.faults.script_raises:
            raise RuntimeError("task script is corrupt")
        return self._script

    def step(self, call: EnvToolCall) -> StepResult:
        self.steps.append(call)
        handlers: dict[str, Callable[..., StepResult]] = {
            "get_order": self._get_order,
            "cancel_order": self._cancel_order,
            "transfer_to_human_agents": lambda summary="": StepResult("Transfer successful", is_done=True),
        }
        return self._run(call, handlers)

    def user_step(self, call: EnvToolCall) -> StepResult:
        self.user_steps.append(call)
        return self._run(call, {"reboot_device": lambda: StepResult("device rebooted")})

    def _run(self, call: EnvToolCall, handlers: dict[str, Callable[..., StepResult]]) -> StepResult:
        time.sleep(self.faults.step_delay_s)
        if call.name == self.faults.raising_tool:
            raise RuntimeError(f"database locked during {call.name}")
        if call.name not in handlers:
            return StepResult(f"Error: unknown tool {call.name!r}", is_error=True)
        try:
            return handlers[call.name](**call.arguments)
        except TypeError as exc:  # wrong arguments: τ answers with an error observation
            return StepResult(f"Error: {exc}", is_error=True)

    def _get_order(self, order_id: str) -> StepResult:
        if order_id not in self.db:
            return StepResult(f"Error: order {order_id!r} not found", is_error=True)
        return StepResult(json.dumps(self.db[order_id], sort_keys=True))

    def _cancel_order(self, order_id: str) -> StepResult:
        order = self.db.get(order_id)
        if order is None or order["status"] != "pending":
            return StepResult(f"Error: order {order_id!r} cannot be cancelled", is_error=True)
        order["status"] = "cancelled"
        return StepResult(json.dumps(order, sort_keys=True))

    def record_message(self, role: str, content: str) -> None:
        if self.faults.record_raises:
            raise RuntimeError(f"cannot record a {role} message")
        self.recorded.append((role, content))

    def fast_reward(self, termination: TerminationReason) -> RewardResult:
        self.reward_calls.append(termination)
        if self.faults.reward_raises:
            raise RuntimeError("evaluator crashed")
        done = float(termination.is_scored and self.db["#1"]["status"] == "cancelled")
        return RewardResult(done, {"db": done, "scored": termination.is_scored})

    def reference_reward(self, termination: TerminationReason) -> RewardResult:
        return self.reward(termination)

    def user_system_prompt(self, guidelines: str | None = None) -> str:
        return f"{guidelines or 'You are a customer.'} {FAKE_INSTRUCTION}"


@dataclass
class FakeEnvBackend(EnvBackend):
    """Opens a :class:`FakeEnvSession` (kept in ``sessions``) for any task; one task per domain and split."""

    faults: EnvFaults = EnvFaults()
    sessions: list[FakeEnvSession] = field(default_factory=list)
    name = "fake"

    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> FakeEnvSession:
        if self.faults.open_raises:
            raise RuntimeError(f"task {ref.task_id!r} has no initial state")
        self.sessions.append(FakeEnvSession(ref, self.faults))
        return self.sessions[-1]

    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        return [TaskRef("tau2", domain, split, "fake-0")]

    def script(self, ref: TaskRef) -> TaskScript:
        return TaskScript(FAKE_INSTRUCTION, self.faults.user_actions, task_id=ref.task_id)

    def task_dump(self, ref: TaskRef) -> dict[str, Any]:
        return {"id": ref.task_id, "instruction": FAKE_INSTRUCTION}

    def splits(self, domain: str) -> tuple[str, ...]:
        return ("train",)

    def package_version(self) -> dict[str, str]:
        return dict(FAKE_ENV_INFO)
