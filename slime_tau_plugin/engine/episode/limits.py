"""The harness's own ending rules (τ²'s orchestrator, τ-bench v1's loop), so our episodes end where τ's do.

τ² ends a simulation after ``max_errors`` tool calls answered with an error (the agent's and the user's
tools together) and after ``max_steps`` messages, counted its way: one step per agent message, per user
message and per batch of tool answers; τ²'s greeting is not a step. It checks both only when no tool
answer is pending, and the error rule wins over the step rule. Its evaluator scores neither ending. The
engine keeps the count with :class:`StepLedger` and asks :meth:`EpisodeLimits.reached` at the same points.
Imports only ``choices`` and ``episode``.
"""

from __future__ import annotations

from dataclasses import dataclass

from slime_tau_plugin.engine.choices import AgentErrorRule
from slime_tau_plugin.engine.episode.result import TerminationReason


@dataclass(frozen=True, slots=True)
class EpisodeLimits:
    """The rules one run applies (``TauConfig.limits``: the benchmark's defaults unless a ``tau_*`` key says)."""

    max_errors: int | None = None
    """End ``too_many_errors`` once this many tool errors (agent + user, + our fed-back parse errors); None = off."""
    max_steps: int | None = None
    """End ``max_steps`` once τ² would count this many steps; None = off."""
    agent_error_rule: AgentErrorRule = AgentErrorRule.OFF

    def reached(self, steps: int, errors: int) -> TerminationReason | None:
        """The limit these counts reach, asked where τ² asks (no tool answer pending); errors win, as in τ²."""
        if self.max_errors is not None and errors >= self.max_errors:
            return TerminationReason.TOO_MANY_ERRORS
        if self.max_steps is not None and steps >= self.max_steps:
            return TerminationReason.MAX_STEPS
        return None

    def is_agent_error(self, text: str, has_tool_call: bool) -> bool:
        """τ²'s communication rule for one agent turn's visible text (reasoning already split off)."""
        has_text = bool(text.strip())
        if self.agent_error_rule is AgentErrorRule.OFF:
            return False
        if not has_text and not has_tool_call:
            return True
        return self.agent_error_rule is AgentErrorRule.STRICT and has_text and has_tool_call


@dataclass(slots=True)
class StepLedger:
    """τ²'s two counters for one episode, kept by the engine as the episode plays."""

    steps: int = 0
    errors: int = 0

    def message(self, count: int = 1) -> None:
        """An agent or user message (a user's tool call included)."""
        self.steps += count

    def tool_answers(self, errors: int) -> None:
        """One batch of tool answers, ``errors`` of them errors."""
        self.steps += 1
        self.errors += errors
