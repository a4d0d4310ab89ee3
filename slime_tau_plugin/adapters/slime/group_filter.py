"""slime dynamic-sampling filter that reports failures instead of redrawing them, and the run's failure guard.

``--dynamic-sampling-filter-path slime_tau_plugin.adapters.slime.group_filter.keep_group``: slime's
``generate_rollout_async`` calls ``keep_group(args, group)`` once per finished group and redraws until it
has ``rollout_batch_size`` kept groups. slime's ``check_reward_nonzero_std`` sees a group whose episodes
all FAILED (reward 0) as zero spread and drops it, so a dead user simulator makes slime draw groups forever
and log nothing (its log hooks run only after a rollout returns).

Here the spread is measured over the episodes that did not fail (as ``advantages.py`` normalises them); a
group with no such episode is dropped with the reason ``failed_<endpoint>`` (slime counts drop reasons as
``rollout/dynamic_filter/drop_<reason>``) and logged. Every group also feeds :class:`FailureGuard`: when more
than ``tau_max_failed_share`` of the episodes of the last ``tau_failure_window_groups`` groups FAILED on one
endpoint, it raises :class:`FailureGuardError`. slime does not catch it: the rollout step fails and
``train.py``'s ``ray.get`` re-raises it, so the job stops with one line naming the endpoint, after at most a
window of groups. Each sample's ``metadata["tau_group_filter"]`` records the verdict (``kept`` or the
drop reason) for ``all_samples.py``. slime is imported only inside :func:`keep_group`.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.adapters.slime.sample_view import is_failed, reward_value
from slime_tau_plugin.engine.config import TauConfig
from slime_tau_plugin.engine.episode import TerminationReason
from slime_tau_plugin.engine.errors import FailedEndpoint, FailureGuardError
from slime_tau_plugin.engine.process import process_registry

logger = logging.getLogger(__name__)

__all__ = [
    "ENDPOINTS",
    "FailureGuard",
    "FailureGuardSettings",
    "FilterVerdict",
    "failure_endpoint",
    "guard_settings",
    "keep_group",
    "observe_unfiltered",
    "reset_guard",
]

ENDPOINTS: dict[str, str] = {
    "user": "the user simulator (tau_user_base_url)",
    "policy": "the policy server (SGLang router / tau_policy_url)",
    "judge": "the NL-assertion judge (tau_judge_base_url)",
    "env": "the τ environment",
    "config": "the plugin configuration",
    "customer": "the simulated customer's own errors, as the review found them (tau_user_model: a wrong chat "
    "template for the user model, or too small a model)",
    "deadline": "the episode deadline (tau_episode_timeout_s: episodes slower than it, often a slow server)",
    "user_token_budget": "the LLM user's token budget (tau_user_token_budget_per_step / _total is spent)",
    "other": "an unknown cause (removed without our metadata: another generate function or hook)",
}
"""Failure causes, by the endpoint a FAILED episode's ``metadata`` names; values are what the stop line says.
The first five are :class:`FailedEndpoint`'s values."""
_FAILED_ENDPOINTS = frozenset(e.value for e in FailedEndpoint)
_BY_REASON = {
    TerminationReason.USER_ERROR.value: FailedEndpoint.USER,
    TerminationReason.POLICY_ERROR.value: FailedEndpoint.POLICY,
}
"""A FAILED sample without ``failed_endpoint`` (written before the field existed): its termination reason."""
KEPT = "kept"
DEFAULT_MAX_FAILED_SHARE = 0.5
DEFAULT_WINDOW_GROUPS = 8
"""The window when slime's ``rollout_batch_size`` is unknown too."""
MIN_STD = 1e-6
"""slime's ``check_reward_nonzero_std`` threshold."""


@dataclass(frozen=True, slots=True)
class FailureGuardSettings:
    """The failure guard's knobs (slime YAML keys ``tau_max_failed_share``, ``tau_failure_window_groups``)."""

    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE
    """Stop once more than this share of the window's episodes FAILED on one endpoint (1.0 = never stop)."""
    window_groups: int = DEFAULT_WINDOW_GROUPS
    """How many recent groups the share is taken over (default: slime's ``rollout_batch_size``, one step)."""
    max_customer_error_share: float = 0.5
    """The limit for episodes the review took out as customer errors (``tau_review_max_error_share``)."""

    def limit(self, endpoint: str) -> float:
        """The share of the window one endpoint may fail before the run stops."""
        return self.max_customer_error_share if endpoint == "customer" else self.max_failed_share


@dataclass(frozen=True, slots=True)
class FilterVerdict:
    """What :func:`keep_group` returns when slime is not importable (tests); inside slime, its own
    ``DynamicFilterOutput`` with the same fields (slime treats any other type as a bare ``keep`` bool)."""

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


def guard_settings(args: Any) -> FailureGuardSettings:
    """Read and check the guard's keys from slime's ``args`` (absent = default).

    Raises:
        ConfigError: a value outside its range, naming the key.
    """
    config = TauConfig.from_args(args)  # the one type and range check of every tau_* key
    share = DEFAULT_MAX_FAILED_SHARE if config.max_failed_share is None else config.max_failed_share
    window = config.failure_window_groups or getattr(args, "rollout_batch_size", None) or DEFAULT_WINDOW_GROUPS
    return FailureGuardSettings(float(share), window, float(config.review_max_error_share))


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
            f"{ENDPOINTS[endpoint]}, more than {_share_key(endpoint)}={self.settings.limit(endpoint):g} of a "
            f"{capacity}-episode window (tau_failure_window_groups={self.settings.window_groups}); fix or restart "
            f"that endpoint, then resume the run; last error: {self._last_error.get(endpoint)}"
        )
        return FailureGuardError(message, endpoint=endpoint, failed=failed, episodes=drawn)


def _share_key(endpoint: str) -> str:
    return "tau_review_max_error_share" if endpoint == "customer" else "tau_max_failed_share"


class _RunWindow:
    """The process's one failure window: slime calls ``keep_group`` as a plain function every group, so the window
    over a run's groups lives in the process registry; new guard settings start a new window."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.guard: FailureGuard | None = None

    def guard_for(self, settings: FailureGuardSettings) -> FailureGuard:
        with self.lock:
            if self.guard is None or self.guard.settings != settings:
                self.guard = FailureGuard(settings)
            return self.guard


def _run_window() -> _RunWindow:
    return process_registry().component("failure guard", _RunWindow)


def reset_guard() -> None:
    """Forget the failure window (a new run in the same process, or a test)."""
    window = _run_window()
    with window.lock:
        window.guard = None


def keep_group(args: Any, samples: list[Any], **kwargs: Any) -> Any:
    """slime's dynamic filter: keep a group whose non-failed episodes' rewards differ.

    Returns slime's ``DynamicFilterOutput`` (a :class:`FilterVerdict` outside slime); drop reasons are
    slime's ``zero_std_<reward>`` or ``failed_<endpoint>``.

    Raises:
        FailureGuardError: too many recent episodes FAILED on one endpoint (stops the run, by design).
        ConfigError: a guard key has a bad value.
    """
    guard = _run_window().guard_for(guard_settings(args))
    _observe(guard, samples)
    ok = [reward_value(args, s) for s in samples if not is_failed(s)]
    if not ok:
        causes = Counter(failure_endpoint(s) for s in samples)
        endpoint = causes.most_common(1)[0][0]
        reason = f"failed_{endpoint}"
        logger.warning(
            "a group of %d episodes all FAILED on %s (dropped as %s, counted by the failure guard): %s",
            len(samples),
            ENDPOINTS[endpoint],
            reason,
            guard.last_error(endpoint),
        )
    elif len(ok) < 2 or statistics.stdev(ok) <= MIN_STD:
        reason = f"zero_std_{round(ok[0], 1)}"
    else:
        reason = None
    for sample in samples:
        if isinstance(getattr(sample, "metadata", None), dict):
            sample.metadata["tau_group_filter"] = reason or KEPT
    return _output(reason is None, reason)


def observe_unfiltered(args: Any, groups: Iterable[Sequence[Any]]) -> None:
    """Feed the failure guard the groups :func:`keep_group` did not see (no ``tau_group_filter`` verdict).

    slime's fully-async rollout runs no dynamic filter; its reward post-process (``advantages.py``) runs
    every step in every mode and calls this, so a dead endpoint stops that run as well, once per group.

    Raises:
        FailureGuardError: as :func:`keep_group`.
    """
    guard: FailureGuard | None = None
    for group in groups:
        metas = [getattr(s, "metadata", None) for s in group]
        if not group or any(isinstance(m, dict) and "tau_group_filter" in m for m in metas):
            continue
        guard = guard or _run_window().guard_for(guard_settings(args))
        _observe(guard, group)
        for meta in metas:
            if isinstance(meta, dict):
                meta["tau_group_filter"] = "unfiltered"


def _observe(guard: FailureGuard, group: Sequence[Any]) -> None:
    """Add ``group`` to the run's window; the stop line is logged as well as raised (Ray shows it late)."""
    try:
        guard.observe(group)
    except FailureGuardError as exc:
        logger.error("%s", exc)
        raise


def _output(keep: bool, reason: str | None) -> Any:
    try:
        from slime.rollout.filter_hub.base_types import DynamicFilterOutput
    except ImportError:
        return FilterVerdict(keep, reason)
    return DynamicFilterOutput(keep=keep, reason=reason)
