"""The review's typed verdict: which customer message went wrong, how, how much it mattered, and who said so.

Tags and severities are τ²'s (upstream ``tau2/evaluator/review_llm_judge_user_only.py``), so a verdict from our
deterministic checks and one from τ²'s judge rubric read the same. Imports nothing from the package.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "ReviewCheck", "ReviewTag", "Severity", "Verdict"]


class ReviewTag(str, enum.Enum):
    """τ²'s user-error tags (values are τ²'s words)."""

    HALLUCINATION = "hallucination"
    INCORRECT_INTERPRETATION = "incorrect_interpretation"
    GUIDELINE_VIOLATION = "guideline_violation"
    REVEALED_INFO_EARLY = "revealed_info_early"
    INCONSISTENT_BEHAVIOR = "inconsistent_behavior"
    PREMATURE_TERMINATION = "premature_termination"
    MISSED_REQUIRED_ACTION = "missed_required_action"
    WRONG_SEQUENCE = "wrong_sequence"
    OTHER = "other"


class Severity(str, enum.Enum):
    """τ²'s severities: did the customer's error change the outcome, and which way."""

    CRITICAL_HELPED = "critical_helped"
    """The error made the task easier than it is (e.g. a fact the customer should not have had)."""
    CRITICAL_HINDERED = "critical_hindered"
    """The error made the task harder or impossible."""
    MINOR = "minor"
    """An error that did not change the outcome: the episode still trains."""

    @property
    def is_critical(self) -> bool:
        return self is not Severity.MINOR


class ReviewCheck(str, enum.Enum):
    """Who found it: a deterministic check (``checks.py``) or the judge rubric."""

    INVENTED_IDENTIFIER = "invented_identifier"
    SPEAKS_AS_AGENT = "speaks_as_agent"
    REPEATED_MESSAGE = "repeated_message"
    EMPTY_REPLY = "empty_reply"
    PASTED_INSTRUCTIONS = "pasted_instructions"
    PREMATURE_STOP = "premature_stop"
    """The customer stopped before a required write while the agent waited on it (``stops.py``)."""
    JUDGE = "judge"
    """τ²'s reviewer rubric through the judge endpoint."""


_ORDER = {Severity.CRITICAL_HINDERED: 0, Severity.CRITICAL_HELPED: 1, Severity.MINOR: 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One customer error."""

    check: ReviewCheck
    tags: tuple[ReviewTag, ...]
    severity: Severity
    message_index: int
    """Index in the episode's ``messages`` (``metadata["messages"]``) of the customer message it points at."""
    detail: str
    """What was found, e.g. ``order id #W0000001 is in neither the instructions nor the conversation``."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check.value,
            "tags": [t.value for t in self.tags],
            "severity": self.severity.value,
            "message_index": self.message_index,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            ReviewCheck(data["check"]),
            tuple(ReviewTag(t) for t in data.get("tags", ())),
            Severity(data["severity"]),
            int(data["message_index"]),
            str(data.get("detail", "")),
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """Everything the review found in one episode (no finding: a clean customer)."""

    findings: tuple[Finding, ...] = ()
    checks: tuple[ReviewCheck, ...] = ()
    """The checks that ran (a clean verdict says what it looked for)."""
    judged: bool = False
    """The judge rubric ran on this episode and answered."""
    judge_error: str | None = None
    """The judge was asked and failed: counted, never read as a clean customer."""
    reward: float | None = None
    """τ's reward before the review (an excluded episode's sample holds 0)."""
    excluded: bool = False
    """The verdict took the episode out of training (``user_error``)."""
    guidelines: str | None = None
    """Which user-simulator guidelines the customer ran: ``tau`` (τ's own), ``name@hash`` of a
    ``tau_user_guidelines_file``, None for the scripted customer."""
    stop: str | None = None
    """The customer's last words when it ended the episode (τ never shows a stop to the agent, so it is in no
    message; a ``premature_stop`` finding's ``message_index`` is ``len(messages)``, this stop)."""

    @property
    def worst(self) -> Finding | None:
        """The finding that decides: the most severe, then the earliest."""
        if not self.findings:
            return None
        return min(self.findings, key=lambda f: (_ORDER[f.severity], f.message_index))

    @property
    def severity(self) -> Severity | None:
        worst = self.worst
        return worst.severity if worst is not None else None

    @property
    def is_critical(self) -> bool:
        return any(f.severity.is_critical for f in self.findings)

    def as_metadata(self) -> dict[str, Any]:
        """``sample.metadata["tau_review"]``: what the CLI, ``show`` and the metrics read."""
        worst = self.worst
        return {
            "severity": self.severity.value if self.severity is not None else None,
            "message_index": worst.message_index if worst is not None else None,
            "tags": sorted({t.value for f in self.findings for t in f.tags}),
            "findings": [f.as_dict() for f in self.findings],
            "checks": [c.value for c in self.checks],
            "judged": self.judged,
            "judge_error": self.judge_error,
            "reward": self.reward,
            "excluded": self.excluded,
            "guidelines": self.guidelines,
            "stop": self.stop,
        }

    @classmethod
    def from_metadata(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            tuple(ReviewCheck(c) for c in data.get("checks", ())),
            bool(data.get("judged", False)),
            data.get("judge_error"),
            data.get("reward"),
            bool(data.get("excluded", False)),
            data.get("guidelines"),
            data.get("stop"),
        )
