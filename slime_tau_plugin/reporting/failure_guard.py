"""The run's failure guard, trainer-neutral: which endpoint a FAILED episode failed on, and a window over recent
groups that stops the run once one endpoint's failures pass a share.

slime feeds it from its dynamic filter and reward post-process (``adapters/slime/group_filter.py``); verl from its
trainer's replay buffer (``adapters/verl/sampler.py``, V1) or its agent-loop workers (``adapters/verl/guard.py``,
the batch trainer). Both hand it sample-like values: ``status`` (an enum whose ``name`` is ``FAILED`` for a failure),
``remove_sample`` (optional) and ``metadata`` with ``termination_reason``, ``failed_endpoint`` and ``error``.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.errors import FailedEndpoint, TauPluginError

__all__ = [
    "DEFAULT_MAX_FAILED_SHARE",
    "DEFAULT_WINDOW_GROUPS",
    "ENDPOINTS",
    "FailureGuard",
    "FailureGuardError",
    "FailureGuardSettings",
    "GuardKeys",
    "GuardWindow",
    "describe",
    "failure_endpoint",
    "is_failed",
]


class FailureGuardError(TauPluginError):
    """Raised by the guard to stop the run: slime's dynamic filter lets it end the rollout step (``train.py``'s
    ``ray.get`` re-raises it), verl's trainer or agent-loop worker raises it the same way, so a dead endpoint stops
    the job with one line naming it instead of redrawing groups or training on failures for the rest of the run.
    """

    def __init__(self, message: str, *, endpoint: str, failed: int, episodes: int) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.failed = failed
        self.episodes = episodes


def is_failed(sample: Any) -> bool:
    """True for an episode that must not count: FAILED status or ``remove_sample`` set."""
    status = getattr(sample, "status", None)
    return bool(getattr(sample, "remove_sample", False)) or getattr(status, "name", None) == "FAILED"


ENDPOINTS: dict[str, str] = {
    "user": "the user simulator (tau_user_base_url)",
    "policy": "the policy server (SGLang router / tau_policy_url)",
    "judge": "the NL-assertion judge (tau_judge_base_url)",
    "env": "the τ environment",
    "config": "the plugin configuration",
    "customer": "the simulated customer's own errors, as the review found them (tau_user_model: a wrong chat "
    "template for the user model, or too small a model)",
    "worker": "the episode workers (tau_episode_workers: their processes or Ray actors died or cannot start)",
    "deadline": "the episode deadline (tau_episode_timeout_s: episodes slower than it, often a slow server)",
    "user_token_budget": "the LLM user's token budget (tau_user_token_budget_per_step / _total is spent)",
    "other": "an unknown cause (removed without our metadata: another generate function or hook)",
}
"""Failure causes, by the endpoint a FAILED episode's ``metadata`` names; values are what the stop line says.
The first seven are :class:`FailedEndpoint`'s values (``tests/adapters/slime/test_failed_endpoints.py`` checks every
one)."""
_FAILED_ENDPOINTS = frozenset(e.value for e in FailedEndpoint)
_BY_REASON = {
    TerminationReason.USER_ERROR.value: FailedEndpoint.USER,
    TerminationReason.POLICY_ERROR.value: FailedEndpoint.POLICY,
}
"""A FAILED sample without ``failed_endpoint`` (written before the field existed): its termination reason."""
DEFAULT_MAX_FAILED_SHARE = 0.5
DEFAULT_WINDOW_GROUPS = 8
"""The window when slime's ``rollout_batch_size`` is unknown too."""


class GuardKeys(Protocol):
    """The guard's keys as a ``TauConfig`` holds them (metrics sit below config: they read it, never import it)."""

    max_failed_share: float | None
    failure_window_groups: int | None
    review_max_error_share: float


@dataclass(frozen=True, slots=True)
class FailureGuardSettings:
    """The failure guard's knobs (slime YAML keys ``tau_max_failed_share``, ``tau_failure_window_groups``)."""

    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE
    """Stop once more than this share of the window's episodes FAILED on one endpoint (1.0 = never stop)."""
    window_groups: int = DEFAULT_WINDOW_GROUPS
    """How many recent groups the share is taken over (default: slime's ``rollout_batch_size``, one step)."""
    max_customer_error_share: float = 0.5
    """The limit for episodes the review took out as customer errors (``tau_review_max_error_share``)."""

    @classmethod
    def from_config(cls, config: GuardKeys, groups_per_step: int | None) -> FailureGuardSettings:
        """The knobs every trainer reads: ``tau_max_failed_share`` (default 0.5) over the last
        ``tau_failure_window_groups`` groups (default: the trainer's groups per step, else 8)."""
        share = DEFAULT_MAX_FAILED_SHARE if config.max_failed_share is None else config.max_failed_share
        window = config.failure_window_groups or groups_per_step or DEFAULT_WINDOW_GROUPS
        return cls(float(share), int(window), float(config.review_max_error_share))

    def limit(self, endpoint: str) -> float:
        """The share of the window one endpoint may fail before the run stops."""
        return self.max_customer_error_share if endpoint == "customer" else self.max_failed_share


def describe(endpoint: str) -> str:
    """What the stop line calls ``endpoint``; a cause missing from :data:`ENDPOINTS` is named as it is, so a
    new failure cause can never turn the guard's one-line stop into a ``KeyError`` inside slime's rollout."""
    return ENDPOINTS.get(endpoint, f"the {endpoint!r} endpoint")


def failure_endpoint(sample: Any) -> str | None:
    """Which endpoint a FAILED sample failed on (a key of :data:`ENDPOINTS`), or None if it did not fail.

    Read from the typed fields ``generate`` writes: ``metadata["failed_endpoint"]`` (the episode's
    :class:`FailedEndpoint`) and ``metadata["termination_reason"]``, never from the error's words.
    """
    if not is_failed(sample):
        return None
    meta = getattr(sample, "metadata", None) or {}
    reason = meta.get("termination_reason")
    if reason is None:
        return "other"
    if reason in (TerminationReason.DEADLINE.value, TerminationReason.USER_TOKEN_BUDGET.value):
        return str(reason)
    failed = meta.get("failed_endpoint")
    if failed in _FAILED_ENDPOINTS:
        return failed
    return _BY_REASON.get(reason, FailedEndpoint.ENV).value


class FailureGuard:
    """Failure causes of the last ``window_groups`` groups; raises once one endpoint's share is too high.

    The share is over the window's capacity (``window_groups`` x group size), so a dead endpoint stops the
    run as soon as the outcome is certain, before the window fills.
    """

    def __init__(self, settings: FailureGuardSettings) -> None:
        self.settings = settings
        self._window: deque[tuple[int, Counter[str]]] = deque(maxlen=settings.window_groups)
        self._last_error: dict[str, str] = {}

    def observe(self, group: Sequence[Any]) -> None:
        """Add one finished group.

        Raises:
            FailureGuardError: more than ``max_failed_share`` of the window's episodes FAILED on one endpoint.
        """
        causes: Counter[str] = Counter()
        for sample in group:
            endpoint = failure_endpoint(sample)
            if endpoint is not None:
                causes[endpoint] += 1
                error = str((getattr(sample, "metadata", None) or {}).get("error") or "no error recorded")
                self._last_error[endpoint] = " ".join(error.split())[:300]
        self._window.append((len(group), causes))
        capacity = self.settings.window_groups * max(len(group), 1)
        totals: Counter[str] = Counter()
        for _, counted in self._window:
            totals.update(counted)
        for endpoint, failed in totals.most_common():
            if failed > self.settings.limit(endpoint) * capacity:
                raise self._error(endpoint, failed, capacity)

    def last_error(self, endpoint: str) -> str | None:
        """The latest ``metadata["error"]`` of an episode that FAILED on ``endpoint``, on one line."""
        return self._last_error.get(endpoint)

    def _error(self, endpoint: str, failed: int, capacity: int) -> FailureGuardError:
        groups = len(self._window)
        drawn = sum(size for size, _ in self._window)
        message = (
            f"slime_tau_plugin stopped the run: {failed} of the last {drawn} episodes ({groups} groups) FAILED on "
            f"{describe(endpoint)}, more than {_share_key(endpoint)}={self.settings.limit(endpoint):g} of a "
            f"{capacity}-episode window (tau_failure_window_groups={self.settings.window_groups}); fix or restart "
            f"that endpoint, then resume the run; last error: {self._last_error.get(endpoint)}"
        )
        return FailureGuardError(message, endpoint=endpoint, failed=failed, episodes=drawn)


class GuardWindow:
    """A process's one failure window over a run: a trainer's hook is called as a plain function per group (slime)
    or its loops are built per row (verl), so the window outlives them in the shared state; new settings start a new
    window. Each trainer subclasses it, so ``shared_state().part(...)`` keeps one window per trainer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.guard: FailureGuard | None = None

    def guard_for(self, settings: FailureGuardSettings) -> FailureGuard:
        """The window's guard, new when the settings changed."""
        with self.lock:
            if self.guard is None or self.guard.settings != settings:
                self.guard = FailureGuard(settings)
            return self.guard

    def reset(self) -> None:
        """Forget the window (a new run in the same process, or a test)."""
        with self.lock:
            self.guard = None


def _share_key(endpoint: str) -> str:
    return "tau_review_max_error_share" if endpoint == "customer" else "tau_max_failed_share"
