"""The review's knobs as one value, read from ``TauConfig``'s ``tau_review_*`` keys (checked there already).

Imports ``config``, ``checks``, ``names`` and ``verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.review.checks import CHECKS, DEFAULT_CHECKS
from slime_tau_plugin.engine.review.names import parse_names
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag

__all__ = ["ReviewSettings"]


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    """How this run reviews its customer."""

    enabled: bool = True
    checks: tuple[ReviewCheck, ...] = DEFAULT_CHECKS
    critical_tags: tuple[ReviewTag, ...] = tuple(ReviewTag)
    """A critical finding removes the episode only when it carries one of these tags."""
    keep_flagged: bool = False
    repeat_limit: int = 3
    judge_share: float = 0.0
    guidelines: str | None = None
    """Which user-simulator guidelines ran (``TauConfig.user_guidelines_label``): recorded in every verdict."""

    @classmethod
    def from_config(cls, config: TauConfig) -> ReviewSettings:
        """The config's review keys."""
        checks = parse_names(config.review_checks, ReviewCheck, "tau_review_checks", tuple(CHECKS))
        tags = parse_names(config.review_critical_tags, ReviewTag, "tau_review_critical_tags")
        keep, share = config.review_keep_flagged, config.review_judge_share
        guidelines = config.user_guidelines_label()
        return cls(config.review, checks, tags, keep, config.review_repeat_limit, share, guidelines)
