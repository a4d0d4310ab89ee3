"""What one episode's simulated customer cost: :class:`CustomerCost`, a typed value on every ``EpisodeResult``.

Counted where the requests are made (``users/chat_client.py`` counts every HTTP request it sends to the customer's
or the review judge's endpoint, retries and failed tries included, with the tokens each answer's ``usage`` reports
and the time the episode awaited the endpoint), and where the review runs (the deterministic checks' CPU time,
``loop/review.py``). The scripted customer makes no request, so its cost is zeros. Trainers read it from
``metadata["tau_user_cost"]`` (slime's sample, verl's ``extra_fields``, the CLI's rows); the per-step numbers are
``reporting/customer_cost.py``'s ``tau_user/cost_*``. Imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["COST_KEY", "ChatCost", "CustomerCost"]

COST_KEY = "tau_user_cost"
"""Where a sample's metadata (and verl's ``extra_fields``) keeps :meth:`CustomerCost.as_metadata`."""


@dataclass(frozen=True, slots=True)
class ChatCost:
    """One chat endpoint's part of an episode: the customer's, or the review judge's."""

    requests: int = 0
    """HTTP requests sent, each try counted: retries and requests that failed included (what the endpoint served)."""
    failed: int = 0
    """Of those, the ones that failed (a connection error, a 5xx or 429, a bad answer): retried, or fatal."""
    prompt_tokens: int = 0
    """Prompt tokens of the answered requests (the endpoint's OpenAI ``usage``; 0 when it reports none)."""
    completion_tokens: int = 0
    wait_s: float = 0.0
    """Time the episode awaited the endpoint: requests, backoff between tries, waits for a slot or an outage."""

    def plus(self, other: ChatCost) -> ChatCost:
        """Both parts together (an episode resumed on a later step adds its earlier legs)."""
        return ChatCost(
            self.requests + other.requests,
            self.failed + other.failed,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.wait_s + other.wait_s,
        )

    @classmethod
    def from_dict(cls, data: Any) -> ChatCost:
        """Read back :func:`dataclasses.asdict`'s form; anything else (absent, a bad value) is zeros."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            int(_number(data.get("requests"))),
            int(_number(data.get("failed"))),
            int(_number(data.get("prompt_tokens"))),
            int(_number(data.get("completion_tokens"))),
            _number(data.get("wait_s")),
        )


@dataclass(frozen=True, slots=True)
class CustomerCost:
    """What the customer (and the review of it) cost one episode."""

    user: ChatCost = ChatCost()
    """The LLM customer's endpoint (``tau_user_base_url``); zeros for the scripted customer."""
    judge: ChatCost = ChatCost()
    """The review judge's rubric requests (``tau_review_judge_share``); zeros for an episode it did not judge."""
    review_cpu_s: float = 0.0
    """CPU time of the review's deterministic checks (the thread's own CPU time, off the event loop)."""
    wall_s: float = 0.0
    """The episode's wall time, its review included and suspensions excluded: the denominator of the shares."""
    guidelines: str | None = None
    """Which user-simulator guidelines the customer ran (``tau``, a ``tau_user_guidelines_file``'s ``name@hash``;
    None for the scripted customer): a cost is only comparable between runs of the same customer."""

    @property
    def user_wait_share(self) -> float:
        """Share of the episode's wall time spent waiting for the customer, in [0, 1]."""
        return _share(self.user.wait_s, self.wall_s)

    @property
    def judge_wait_share(self) -> float:
        """Share of the episode's wall time spent waiting for the review judge, in [0, 1]."""
        return _share(self.judge.wait_s, self.wall_s)

    def plus(self, earlier: CustomerCost) -> CustomerCost:
        """This leg's cost with an earlier leg's (the wall time is this leg's: it already counts the earlier)."""
        return CustomerCost(
            self.user.plus(earlier.user),
            self.judge.plus(earlier.judge),
            self.review_cpu_s + earlier.review_cpu_s,
            self.wall_s,
            self.guidelines or earlier.guidelines,
        )

    def as_metadata(self) -> dict[str, Any]:
        """JSON-safe: ``{"user": {...}, "judge": {...}, "review_cpu_s", "wall_s", "user_wait_share",
        "judge_wait_share", "guidelines"}`` (the shares are derived, written for people reading a sample)."""
        return {
            "user": _rounded(asdict(self.user)),
            "judge": _rounded(asdict(self.judge)),
            "review_cpu_s": round(self.review_cpu_s, 6),
            "wall_s": round(self.wall_s, 4),
            "user_wait_share": round(self.user_wait_share, 4),
            "judge_wait_share": round(self.judge_wait_share, 4),
            "guidelines": self.guidelines,
        }

    @classmethod
    def from_metadata(cls, data: Any) -> CustomerCost:
        """Read back :meth:`as_metadata` (a sample's ``metadata["tau_user_cost"]``); anything else is zeros."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            ChatCost.from_dict(data.get("user")),
            ChatCost.from_dict(data.get("judge")),
            _number(data.get("review_cpu_s")),
            _number(data.get("wall_s")),
            data.get("guidelines") if isinstance(data.get("guidelines"), str) else None,
        )


def _share(part: float, whole: float) -> float:
    return min(1.0, max(0.0, part / whole)) if whole > 0 else 0.0


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in values.items()}
