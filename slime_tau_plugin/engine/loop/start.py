"""How an episode begins: fresh (open the env, the user, the prompt), or from a suspended episode's state.

A fresh start opens τ's environment for the task, the tooling for its tools, the user simulator and its
opening, and renders the prompt (a τ² task may begin mid-conversation: ``EnvSession.history``). A resume
builds the same collaborators from an :class:`EpisodeState` alone: a fresh environment with the logged calls
replayed and checked (``env_log.replay``), the template of the same mode and the same prompt ids, the user
simulator given back its snapshot, the trajectory, counters and clocks as they were. Any disagreement is a
:class:`ResumeError` (the sample FAILS naming it).
"""

from __future__ import annotations

from slime_tau_plugin.engine.envs.base import FirstMove, MessageHistory
from slime_tau_plugin.engine.episode.cost import CustomerCost
from slime_tau_plugin.engine.episode.limits import StepLedger
from slime_tau_plugin.engine.episode.result import EpisodeCounters, TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import EnvBackendError, ResumeError, UserSimulatorError
from slime_tau_plugin.engine.loop.blocking import EpisodeCalls
from slime_tau_plugin.engine.loop.env_log import RecordingSession, replay
from slime_tau_plugin.engine.loop.live import LiveEpisode, ResumeStats
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.users.simulators import make_user


async def open_fresh(calls: EpisodeCalls, resources: EpisodeResources, ep: LiveEpisode) -> None:
    """Open the env, the tooling and the user; the episode's ``sampling_seed`` seeds an LLM user, whose opening is
    its GRPO group's (``ep.options.group``) with ``tau_user_shared_opening``.

    The prompt is the system prompt, the task's message history as the agent saw it (if any) and, when the user
    speaks first (always without history), the user's first message. A user who stops at once ends a task with
    history (``ep.ended``), as in τ²; without history it is a user-simulator failure.
    """
    session = await calls.env(ep, resources.backend.open, ep.task, resources.env_options)
    await _tooling_and_user(calls, resources, ep, RecordingSession(session), ep.options.group)
    history = session.history
    first = history.first_move if history is not None else FirstMove.USER
    ep.messages = [{"role": "system", "content": session.agent_system_prompt}]
    ep.messages += [dict(m) for m in history.agent_view] if history is not None else []
    if first is FirstMove.USER_STOPPED:
        ep.ended = TerminationReason.USER_STOP
    if first is FirstMove.USER:
        turn = await calls.user(ep, ep.user.opening())
        ep.count_user_turn(turn)  # τ² counts the user's first message, not its greeting
        if turn.is_stop and history is None:
            raise UserSimulatorError(f"the user simulator stopped before saying anything: {turn.text[:200]!r}")
        if turn.is_stop:
            ep.ended = TerminationReason.USER_STOP
        else:
            ep.messages.append({"role": "user", "content": turn.text})
            await calls.env(ep, ep.session.record_message, "user", turn.text)
    ep.trajectory = Trajectory(await calls.blocking(ep.template.prompt_ids, ep.messages, error=EnvBackendError))


def prompt_messages(history: MessageHistory | None) -> int:
    """How many of an episode's messages its prompt holds: system, the history, the user's first message."""
    if history is None:
        return 2
    return 1 + len(history.agent_view) + int(history.first_move is FirstMove.USER)


async def resume(calls: EpisodeCalls, resources: EpisodeResources, ep: LiveEpisode) -> None:
    """Rebuild ``ep`` from its suspended state (``ep.options.resume``) on fresh collaborators, checking that they
    reach the world it left. The user simulator is rebuilt without the group: its opening is in the state.

    Raises:
        ResumeError: a replayed answer, the database hash, the template mode or the prompt ids differ.
    """
    state = ep.options.resume
    assert isinstance(state, EpisodeState)  # the engine loaded it (EpisodeOptions.state)
    fresh = await calls.env(ep, resources.backend.open, ep.task, resources.env_options)
    session = await calls.env(ep, replay, fresh, state.actions, state.env_hash)
    await _tooling_and_user(calls, resources, ep, session)
    if ep.template.mode.value != state.template_mode:
        raise ResumeError(
            f"resume: the chat template now computes continuations as {ep.template.mode.value!r}; "
            f"the suspended episode used {state.template_mode!r}"
        )
    opening = list(state.messages[: prompt_messages(session.history)])
    prompt = await calls.blocking(ep.template.prompt_ids, opening, error=EnvBackendError)
    if tuple(prompt) != state.prompt_ids:
        raise ResumeError("resume: the stored prompt ids are not what this tokenizer and template render")
    ep.user.restore(dict(state.user))
    ep.trajectory = state.trajectory()
    if state.open_turn_ids:
        if state.open_turn_ids > _trailing_model_ids(ep.trajectory):
            raise ResumeError(f"resume: open_turn_ids={state.open_turn_ids} is more than the model ids that end it")
        ep.open_turn = ep.trajectory.response_ids[-state.open_turn_ids :]
    ep.messages = [dict(m) for m in state.messages]
    ep.num_turns = state.num_turns
    try:
        ep.counters = EpisodeCounters(**state.counters)
    except TypeError as exc:
        raise ResumeError(f"resume: counters: {exc}") from exc
    ep.ledger = StepLedger(state.steps, state.errors)
    ep.policy_s += state.policy_s
    ep.env_s += state.env_s
    ep.user_s += state.user_s
    ep.active_before_s = state.active_s
    ep.net.retries += state.net_retries
    ep.cost_before = CustomerCost.from_metadata(state.customer_cost)
    ep.resumed = ResumeStats(state.suspensions, state.turns_before)


async def _tooling_and_user(
    calls: EpisodeCalls,
    resources: EpisodeResources,
    ep: LiveEpisode,
    session: RecordingSession,
    group: str | None = None,
) -> None:
    seed = ep.sampling_params.get("sampling_seed")
    ep.session = session
    ep.template, ep.parser = await calls.blocking(resources.tooling.get, session.tools, error=EnvBackendError)
    runner = calls.runner(EnvBackendError)
    ep.user = await calls.user(ep, make_user(resources.config, session, runner, resources.user_client, seed, group))
    ep.guidelines = resources.config.user_guidelines_label()


def _trailing_model_ids(traj: Trajectory) -> int:
    count = 0
    for seg in reversed(traj.segments):
        if not seg.is_trainable:
            break
        count += len(seg.ids)
    return count
