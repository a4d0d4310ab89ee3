"""One turn after another: the episode loop's states (:class:`TurnState`), read top to bottom.

GENERATING -> PARSING -> ACTING -> CONTINUING -> GENERATING ..., until a state ENDS the episode with its
:class:`TerminationReason` (verl's ``ToolAgentLoop`` reads the same way). Each state is one method that returns
the next. Every id the policy
sampled is kept unchanged (mask 1) and every continuation comes from the chat template (mask 0); τ²'s error and
step limits and its agent-error rule are asked where τ asks them. Like verl's ``AgentData``, the episode's whole
state is one value, :class:`~.live.LiveEpisode` (the turn in progress included), and each state's method reads and
writes it; the loop itself holds only the collaborators. :class:`~.run.EpisodeEngine` opens the episode, runs
:class:`TurnLoop` and turns its ending into the result.
"""

from __future__ import annotations

import time
from typing import Any

from slime_tau_plugin.engine.chat.tool_calls import ParsedAction
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import EnvToolCall
from slime_tau_plugin.engine.episode.request import AbortCheck
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.episode.trajectory import TokenBudget
from slime_tau_plugin.engine.loop.blocking import EpisodeCalls, run_cpu
from slime_tau_plugin.engine.loop.live import LiveEpisode, TurnState
from slime_tau_plugin.engine.policy.client import FinishReason, PolicyClient
from slime_tau_plugin.engine.users.simulators import UserTurn

__all__ = ["AbortCheck", "TurnLoop", "TurnState"]


class TurnLoop:
    """The turns of one episode, over the engine's collaborators: this episode's policy, the config's limits and
    the timed τ and user calls."""

    def __init__(self, policy: PolicyClient, config: TauConfig, calls: EpisodeCalls) -> None:
        self.policy = policy
        self.config = config
        self.limits = config.limits
        self.calls = calls

    async def play(self, ep: LiveEpisode) -> TerminationReason:
        """The turn's states, read top to bottom: GENERATING -> PARSING -> ACTING -> CONTINUING -> GENERATING ...,
        until one of them ENDS the episode with its :class:`TerminationReason`. A turn cut mid-generation
        (``ep.open_turn``, after an abort and a resume) goes on from the ids it had: its next request continues
        it, and it counts once."""
        ep.budget = self.token_budget(ep.sampling_params)
        ep.turn = ep.num_turns - 1 if ep.open_turn else ep.num_turns
        step = {
            TurnState.GENERATING: self._generating,
            TurnState.PARSING: self._parsing,
            TurnState.ACTING: self._acting,
            TurnState.CONTINUING: self._continuing,
        }
        state = TurnState.GENERATING
        while state is not TurnState.ENDED:
            state = await step[state](ep)
        assert ep.ended is not None
        return ep.ended

    async def _generating(self, ep: LiveEpisode) -> TurnState:
        """Between turns: the turn limit, the trainer's abort, the deadline, the token budget; then one
        generation, every sampled id kept with its log-prob (mask 1)."""
        traj, options = ep.trajectory, ep.options
        if ep.turn >= self.config.max_turns:
            return ep.end(TerminationReason.MAX_TURNS)
        if options.should_abort is not None and options.should_abort():
            return ep.end(TerminationReason.ABORTED)
        if ep.net.past_deadline():
            return ep.end(TerminationReason.DEADLINE)
        max_new = ep.budget.max_new_tokens(traj, used_this_turn=len(ep.open_turn))
        if max_new < 1:
            return ep.end(TerminationReason.BUDGET if not ep.open_turn else TerminationReason.LENGTH)
        params = {**ep.sampling_params, "max_new_tokens": max_new}
        t0 = time.perf_counter()
        gen = await self.policy.generate(traj.ids, params, rid=f"{ep.rid_prefix}-{ep.turn}", headers=options.headers)
        ep.policy_s += time.perf_counter() - t0
        traj.add_model_turn(gen.output_ids, gen.log_probs, gen.meta_info)
        ep.open_turn.extend(gen.output_ids)
        ep.num_turns = ep.turn + 1 if ep.open_turn else ep.turn
        if gen.finish_reason is FinishReason.ABORT:  # the open turn stays open: a resume continues it
            return ep.end(TerminationReason.ABORTED)
        ep.output, ep.open_turn = ep.open_turn, []
        ep.text = ep.template.decode(ep.output)
        ep.messages.append({"role": "assistant", "content": ep.text})
        if gen.finish_reason is FinishReason.LENGTH:
            return ep.end(TerminationReason.LENGTH)
        return TurnState.PARSING

    async def _parsing(self, ep: LiveEpisode) -> TurnState:
        """The model's text -> one action; τ²'s agent-error rule, asked before the message counts as a step."""
        ep.action = action = ep.parser.parse(ep.text)
        is_error = action.kind != "invalid" and self.limits.is_agent_error(action.content, bool(action.calls))
        if not (is_error and action.kind == "respond"):  # τ² refuses an empty turn before counting it
            ep.ledger.message()
        return ep.end(TerminationReason.AGENT_ERROR) if is_error else TurnState.ACTING

    async def _acting(self, ep: LiveEpisode) -> TurnState:
        """The tools or the user answer the action (τ's limits asked where τ asks them)."""
        assert ep.action is not None
        ep.answers, done = await self._act(ep, ep.action)
        return ep.end(done) if done is not None else TurnState.CONTINUING

    async def _continuing(self, ep: LiveEpisode) -> TurnState:
        """The chat template's continuation after the model turn (mask 0), rendered off the loop; the next turn."""
        template = ep.template
        continuation, fell_back = await run_cpu(template.next_ids, ep.answers, ep.messages)
        if fell_back:
            ep.counters = ep.counters.plus(template_fallbacks=1)
        eot = template.eot_ids
        closing = [] if list(ep.output[-len(eot) :]) == eot else eot
        ids = [*closing, *continuation]
        if not ep.budget.fits(ep.trajectory, len(ids)):
            return ep.end(TerminationReason.BUDGET)
        ep.trajectory.add_continuation(ids)
        ep.messages.extend(ep.answers)
        ep.turn += 1
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
