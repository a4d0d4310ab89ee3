"""The review at an episode's end: build what it reads, run the checks, and let the verdict decide training.

The engine calls :func:`review_episode` once per finished episode that would train (a failure, an abort or a
cut-off episode is not reviewed: it trains on nothing already). A critical finding whose tags are in
``tau_review_critical_tags`` turns the result into ``user_error`` blamed on :attr:`FailedEndpoint.CUSTOMER`: FAILED,
reward 0, loss mask 0, ``remove_sample``, left out of the group's statistics and of pass^k, counted beside it; τ's
own reward stays in the verdict. ``tau_review_keep_flagged`` records the verdict and changes nothing. The tokens are
untouched either way: a reviewed episode holds the same ids it was played with.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from slime_tau_plugin.engine.config.review_settings import ReviewSettings
from slime_tau_plugin.engine.envs.base import STOP_MARKER
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode.state import ActionKind
from slime_tau_plugin.engine.errors import FailedEndpoint
from slime_tau_plugin.engine.loop.blocking import run_cpu
from slime_tau_plugin.engine.loop.start import prompt_messages
from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.engine.review.verdict import Finding, ReviewCheck, Verdict
from slime_tau_plugin.engine.users.review_judge import JudgeReviewer, is_selected
from slime_tau_plugin.engine.users.simulators import LLMUser

if TYPE_CHECKING:
    from slime_tau_plugin.engine.loop.live import LiveEpisode

__all__ = ["apply_verdict", "review_episode", "review_input", "stop_words"]


def review_input(ep: LiveEpisode, result: EpisodeResult, settings: ReviewSettings) -> ReviewInput:
    """The finished episode as the checks read it: the customer's instructions, the messages, its tool results
    and its tools' schemas (a customer may name the tools it has)."""
    session = ep.session
    history = session.history if session is not None else None
    first = prompt_messages(history) - (1 if history is None else 0)  # the simulator's opening itself is reviewed
    outputs = ep.user.tool_outputs() if ep.user is not None else ()
    log = session.log if session is not None else ()
    calls = tuple(a.name for a in log if a.kind is ActionKind.AGENT)
    own = tuple(a.name for a in log if a.kind is ActionKind.USER)  # the customer's device actions
    tools = [json.dumps(tool) for tool in session.user_tools] if session is not None else []  # it sees its tools
    return ReviewInput(
        instructions=session.script.user_instructions if session is not None else "",
        messages=result.messages,
        reward=float(result.reward),
        first_index=first,
        tool_outputs=(*outputs, *tools),
        repeat_limit=settings.repeat_limit,
        stop=stop_words(ep, result),
        required_writes=session.required_writes() if session is not None else (),
        agent_calls=calls,
        required_user_writes=session.required_user_writes() if session is not None else (),
        user_calls=own,
    )


def stop_words(ep: LiveEpisode, result: EpisodeResult) -> str | None:
    """The simulated customer's last words when it ended the episode, else None. An episode that ended before the
    model's first turn (a stop in the task's own history, τ's, not the simulator's) has none: every other ending
    sets ``ep.ended`` too (``LiveEpisode.end``), so the model's turns tell them apart. τ never shows a stop to the
    agent, so it is not in ``result.messages``: the LLM user keeps it as its last message; the scripted user's stop
    is the marker alone."""
    if result.termination is not TerminationReason.USER_STOP or ep.num_turns == 0:
        return None
    history = ep.user.history if isinstance(ep.user, LLMUser) else None
    if history and history[-1].get("role") == "assistant":
        return str(history[-1].get("content") or "")
    return STOP_MARKER


async def review_episode(
    ep: LiveEpisode,
    result: EpisodeResult,
    settings: ReviewSettings,
    judge: JudgeReviewer | None = None,
    key: str = "",
) -> EpisodeResult:
    """``result`` with the review's verdict (and its consequence) applied.

    The checks are pure CPU over one conversation (about a millisecond per episode, benchmarks/user_review.md),
    run off the event loop on the plugin's CPU pool; the judge rubric, for the share of episodes
    ``key`` selects, is one awaited request within the episode's deadline.
    """
    if not settings.enabled or result.trajectory is None or not result.termination.is_trainable:
        return result
    review = review_input(ep, result, settings)
    findings, cpu_s = await run_cpu(_timed_checks, review, settings.checks)  # off the event loop
    ep.review_cpu_s += cpu_s
    judged, judge_error = False, None
    if judge is not None and is_selected(settings.judge_share, key):
        guidelines = str(ep.user.history[0].get("content") or "") if isinstance(ep.user, LLMUser) else ""
        extra, judge_error = await judge.review(
            guidelines, review.instructions, review.messages, review.first_index, ep.net.deadline, review.stop
        )
        findings = sorted([*findings, *extra], key=lambda f: f.message_index)
        judged = judge_error is None
    verdict = Verdict(
        tuple(findings),
        settings.checks,
        judged,
        judge_error,
        reward=float(result.reward),
        guidelines=settings.guidelines,
        stop=review.stop,
    )
    return replace(apply_verdict(result, verdict, settings), cost=ep.customer_cost())  # the review's cost too


def _timed_checks(review: ReviewInput, checks: tuple[ReviewCheck, ...]) -> tuple[list[Finding], float]:
    """The checks' findings and the CPU time they took in this (pool) thread: what the review costs."""
    t0 = time.thread_time()
    findings = run_checks(review, checks)
    return findings, time.thread_time() - t0


def apply_verdict(result: EpisodeResult, verdict: Verdict, settings: ReviewSettings) -> EpisodeResult:
    """What the verdict does: a decisive finding makes the episode ``user_error`` (unless kept for an ablation)."""
    decisive = [f for f in verdict.findings if f.severity.is_critical and set(f.tags) & set(settings.critical_tags)]
    if not decisive or settings.keep_flagged:
        return replace(result, review=verdict)
    worst = min(decisive, key=lambda f: f.message_index)
    return replace(
        result,
        termination=TerminationReason.USER_ERROR,
        failed_endpoint=FailedEndpoint.CUSTOMER,
        reward=0.0,
        error=_error_line(worst),
        review=replace(verdict, excluded=True),
    )


def _error_line(finding: Finding) -> str:
    return (
        f"CustomerError: the review found {finding.check.value} ({finding.severity.value}) at message "
        f"{finding.message_index}: {finding.detail}"
    )
