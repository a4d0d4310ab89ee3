"""The review at an episode's end: build what it reads, run the checks, and let the verdict decide training.

The engine calls :func:`review_episode` once per finished episode that would train (a failure, an abort or a
cut-off episode is not reviewed: it trains on nothing already). A critical finding whose tags are in
``tau_review_critical_tags`` turns the result into ``user_error`` blamed on :attr:`FailedEndpoint.CUSTOMER`: FAILED,
reward 0, loss mask 0, ``remove_sample``, left out of the group's statistics and of pass^k, counted beside it; τ's
own reward stays in the verdict. ``tau_review_keep_flagged`` records the verdict and changes nothing. The tokens are
untouched either way: a reviewed episode holds the same ids it was played with.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from slime_tau_plugin.engine.episode import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode_start import prompt_messages
from slime_tau_plugin.engine.errors import FailedEndpoint
from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.engine.review.settings import ReviewSettings
from slime_tau_plugin.engine.review.verdict import Finding, Verdict

if TYPE_CHECKING:
    from slime_tau_plugin.engine.live_episode import LiveEpisode

__all__ = ["apply_verdict", "review_episode", "review_input"]


def review_input(ep: LiveEpisode, result: EpisodeResult, settings: ReviewSettings) -> ReviewInput:
    """The finished episode as the checks read it: the customer's instructions, the messages, its tool results."""
    session = ep.session
    history = session.history if session is not None else None
    first = prompt_messages(history) - (1 if history is None else 0)  # the simulator's opening itself is reviewed
    outputs = ep.user.tool_outputs() if ep.user is not None else ()
    return ReviewInput(
        instructions=session.script.user_instructions if session is not None else "",
        messages=result.messages,
        reward=float(result.reward),
        first_index=first,
        tool_outputs=tuple(outputs),
        repeat_limit=settings.repeat_limit,
    )


def review_episode(ep: LiveEpisode, result: EpisodeResult, settings: ReviewSettings) -> EpisodeResult:
    """``result`` with the deterministic review's verdict (and its consequence) applied.

    Pure CPU over one conversation (regular expressions over a few kilobytes: well under a millisecond per
    episode, benchmarks/user_review.md), so it runs where the episode ends.
    """
    if not settings.enabled or result.trajectory is None or not result.termination.is_trainable:
        return result
    findings = run_checks(review_input(ep, result, settings), settings.checks)
    return apply_verdict(result, Verdict(tuple(findings), settings.checks, reward=float(result.reward)), settings)


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
