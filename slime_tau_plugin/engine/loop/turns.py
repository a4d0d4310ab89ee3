"""One turn after another: the episode loop's states (:class:`TurnState`), read top to bottom.

GENERATING -> PARSING -> ACTING -> CONTINUING -> GENERATING ..., until a state ENDS the episode with its
:class:`TerminationReason` (verl's ``ToolAgentLoop`` reads the same way). Each state is one method that returns
the next; the turn in progress (:class:`Turn`) is the only thing they hand each other. Every id the policy
sampled is kept unchanged (mask 1) and every continuation comes from the chat template (mask 0); τ²'s error and
step limits and its agent-error rule are asked where τ asks them. :class:`~.run.EpisodeEngine` opens the
episode, runs :class:`TurnLoop` and turns its ending into the result.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.engine.chat.tool_calls import ParsedAction
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import EnvToolCall
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.episode.trajectory import TokenBudget
from slime_tau_plugin.engine.loop.blocking import run_cpu
from slime_tau_plugin.engine.loop.live import EpisodeCalls, LiveEpisode
from slime_tau_plugin.engine.policy.client import FinishReason, PolicyClient
from slime_tau_plugin.engine.users.simulators import UserTurn

AbortCheck = Callable[[], bool]
"""Asked between turns: True when the trainer no longer wants this episode (slime's rollout abort)."""


class TurnState(enum.Enum):
    """Where a turn of the episode loop stands (``TurnLoop.play``): each state's step returns the next."""

    GENERATING = "generating"
    """Between-turn checks (turn limit, abort, deadline, budget), then the policy generates the model turn."""
    PARSING = "parsing"
    """The model's text becomes an action (tool calls, a reply to the user, or an invalid call)."""
    ACTING = "acting"
    """τ's tools or the user simulator answer the action."""
    CONTINUING = "continuing"
    """The chat template's continuation ids join the trajectory; the next turn begins."""
    ENDED = "ended"
    """A :class:`TerminationReason` ended the episode."""


@dataclass(frozen=True, slots=True)
class EpisodeRun:
    """How one call of ``run_episode`` plays: request ids, routing headers, abort check, resume and suspend."""

    rid_prefix: str
    headers: dict[str, str] | None
    should_abort: AbortCheck | None
    resume: EpisodeState | None
    suspend: bool
    group: str | None = None
    """The trainer's GRPO group (the customer's opening is shared within it: ``users/shared_opening.py``)."""


@dataclass(slots=True)
class Turn:
    """The turn in progress: what its states hand each other (the loop's only mutable scratch)."""

    ep: LiveEpisode
    sampling_params: dict[str, Any]
    run: EpisodeRun
    budget: TokenBudget
    number: int = 0
    """0-based index of the model turn being played."""
    output: list[int] = field(default_factory=list)
    """The model turn's ids (a resumed open turn's included)."""
    text: str = ""
    action: ParsedAction | None = None
    answers: list[dict[str, Any]] = field(default_factory=list)
    """What the tools or the user answered: the messages the model sees next."""
    ending: TerminationReason | None = None

    def end(self, reason: TerminationReason) -> TurnState:
        self.ending = reason
        return TurnState.ENDED


class TurnLoop:
    """The turns of one episode, over the engine's collaborators: this episode's policy, the config's limits and
    the timed τ and user calls."""

    def __init__(self, policy: PolicyClient, config: TauConfig, calls: EpisodeCalls) -> None:
        self.policy = policy
        self.config = config
        self.limits = config.limits
        self.calls = calls

    async def play(self, ep: LiveEpisode, sampling_params: dict[str, Any], run: EpisodeRun) -> TerminationReason:
        """The turn's states, read top to bottom: GENERATING -> PARSING -> ACTING -> CONTINUING -> GENERATING ...,
        until one of them ENDS the episode with its :class:`TerminationReason`. A turn cut mid-generation
        (``ep.open_turn``, after an abort and a resume) goes on from the ids it had: its next request continues
        it, and it counts once."""
        turn = Turn(ep, sampling_params, run, self.token_budget(sampling_params))
        turn.number = ep.num_turns - 1 if ep.open_turn else ep.num_turns
        step = {
            TurnState.GENERATING: self._generating,
            TurnState.PARSING: self._parsing,
            TurnState.ACTING: self._acting,
            TurnState.CONTINUING: self._continuing,
        }
        state = TurnState.GENERATING
        while state is not TurnState.ENDED:
            state = await step[state](turn)
        assert turn.ending is not None
        return turn.ending

    async def _generating(self, t: Turn) -> TurnState:
        """Between turns: the turn limit, the trainer's abort, the deadline, the token budget; then one
        generation, every sampled id kept with its log-prob (mask 1)."""
        ep, traj = t.ep, t.ep.trajectory
        if t.number >= self.config.max_turns:
            return t.end(TerminationReason.MAX_TURNS)
        if t.run.should_abort is not None and t.run.should_abort():
            return t.end(TerminationReason.ABORTED)
        if ep.net.past_deadline():
            return t.end(TerminationReason.DEADLINE)
        max_new = t.budget.max_new_tokens(traj, used_this_turn=len(ep.open_turn))
        if max_new < 1:
            return t.end(TerminationReason.BUDGET if not ep.open_turn else TerminationReason.LENGTH)
        params = {**t.sampling_params, "max_new_tokens": max_new}
        t0 = time.perf_counter()
        gen = await self.policy.generate(traj.ids, params, rid=f"{t.run.rid_prefix}-{t.number}", headers=t.run.headers)
        ep.policy_s += time.perf_counter() - t0
        traj.add_model_turn(gen.output_ids, gen.log_probs, gen.meta_info)
        ep.open_turn.extend(gen.output_ids)
        ep.num_turns = t.number + 1 if ep.open_turn else t.number
        if gen.finish_reason is FinishReason.ABORT:  # the open turn stays open: a resume continues it
            return t.end(TerminationReason.ABORTED)
        t.output, ep.open_turn = ep.open_turn, []
        t.text = ep.template.decode(t.output)
        ep.messages.append({"role": "assistant", "content": t.text})
        if gen.finish_reason is FinishReason.LENGTH:
            return t.end(TerminationReason.LENGTH)
        return TurnState.PARSING

    async def _parsing(self, t: Turn) -> TurnState:
        """The model's text -> one action; τ²'s agent-error rule, asked before the message counts as a step."""
        t.action = t.ep.parser.parse(t.text)
        action = t.action
        is_error = action.kind != "invalid" and self.limits.is_agent_error(action.content, bool(action.calls))
        if not (is_error and action.kind == "respond"):  # τ² refuses an empty turn before counting it
            t.ep.ledger.message()
        return t.end(TerminationReason.AGENT_ERROR) if is_error else TurnState.ACTING

    async def _acting(self, t: Turn) -> TurnState:
        """The tools or the user answer the action (τ's limits asked where τ asks them)."""
        assert t.action is not None
        t.answers, done = await self._act(t.ep, t.action)
        return t.end(done) if done is not None else TurnState.CONTINUING

    async def _continuing(self, t: Turn) -> TurnState:
        """The chat template's continuation after the model turn (mask 0), rendered off the loop; the next turn."""
        ep, template = t.ep, t.ep.template
        continuation, fell_back = await run_cpu(template.next_ids, t.answers, ep.messages)
        if fell_back:
            ep.counters = ep.counters.plus(template_fallbacks=1)
        eot = template.eot_ids
        closing = [] if list(t.output[-len(eot) :]) == eot else eot
        ids = [*closing, *continuation]
        if not t.budget.fits(ep.trajectory, len(ids)):
            return t.end(TerminationReason.BUDGET)
        ep.trajectory.add_continuation(ids)
        ep.messages.extend(t.answers)
        t.number += 1
        return TurnState.GENERATING

    async def _act(
        self, ep: LiveEpisode, action: ParsedAction
    ) -> tuple[list[dict[str, Any]], TerminationReason | None]:
        """Carry out one parsed action; return the messages the model sees next, or a termination."""
        if action.kind == "invalid":  # answered like a tool error; τ² would count an error per call
            ep.counters = ep.counters.plus(parse_errors=1)
            ep.ledger.tool_answers(errors=max(1, action.blocks))
            return [{"role": "tool", "content": f"Error: {action.reason}"}], self._limit(ep)
        if action.kind == "respond":
            limit = self._limit(ep)  # τ² asks before the user speaks
            if limit is not None:
                return [], limit
            turn = await self._user_reply(ep, action.content)
            ep.count_user_turn(turn)
            if turn.is_stop:  # a limit reached on the same step wins, as in τ²
                return [], self._limit(ep) or TerminationReason.USER_STOP
            return [{"role": "user", "content": turn.text}], self._limit(ep)
        messages: list[dict[str, Any]] = []
        errors = 0
        for i, call in enumerate(action.calls):
            ep.counters = ep.counters.plus(tool_calls=1)
            step = await self.calls.env(
                ep, ep.session.step, EnvToolCall(call.name, call.arguments, f"call-{ep.num_turns}-{i}")
            )
            ep.counters = ep.counters.plus(tool_errors=int(step.is_error))
            errors += int(step.is_error)
            messages.append({"role": "tool", "name": call.name, "content": step.content})
            if step.is_done:
                ep.ledger.tool_answers(errors)
                return messages, TerminationReason.AGENT_STOP
        ep.ledger.tool_answers(errors)
        return messages, self._limit(ep)

    def _limit(self, ep: LiveEpisode) -> TerminationReason | None:
        """τ²'s error and step limits, asked when no tool answer is pending."""
        return self.limits.reached(ep.ledger.steps, ep.ledger.errors)

    def token_budget(self, sampling_params: dict[str, Any]) -> TokenBudget:
        """Per-turn cap (the tighter of ``tau_max_tokens_per_turn`` and slime's ``max_new_tokens``), whole-sequence
        cap (``max_context_len``) and the optional whole-response cap (``tau_max_response_len``)."""
        caps = [c for c in (self.config.max_tokens_per_turn, sampling_params.get("max_new_tokens")) if c]
        per_turn = min(caps) if caps else None
        return TokenBudget(self.config.max_context_len, self.config.max_response_len, per_turn)

    async def _user_reply(self, ep: LiveEpisode, text: str) -> UserTurn:
        await self.calls.env(ep, ep.session.record_message, "assistant", text)
        turn = await self.calls.user(ep, ep.user.reply(text))
        if not turn.is_stop:
            await self.calls.env(ep, ep.session.record_message, "user", turn.text)
        return turn
