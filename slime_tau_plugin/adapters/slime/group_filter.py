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
drop reason) for ``all_samples.py``.

Drops are bounded (``redraw.py``): once dropping a group would make slime draw more than ``tau_max_redraws``
over-sampling batches beyond the step's first round, every rejected group of the step comes back with slime's
``keep_when_insufficient`` (its ``check_reward_nonzero_std_with_fallback`` contract), slime keeps it to fill the
batch, and its mark is ``short_<reason>``. slime is imported only inside :func:`keep_group`.
"""

from __future__ import annotations

import logging
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.adapters.slime.redraw import SHORT_PREFIX, StepShape, redraw_budget
from slime_tau_plugin.adapters.slime.sample_view import current_rollout_id, is_failed, reward_value
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.reporting.failure_guard import (  # the guard itself is trainer-neutral (verl uses it too)
    ENDPOINTS,
    FailureGuard,
    FailureGuardError,
    FailureGuardSettings,
    GuardWindow,
    describe,
    failure_endpoint,
)

logger = logging.getLogger(__name__)

__all__ = [
    "ENDPOINTS",
    "FailureGuard",
    "FailureGuardError",
    "FailureGuardSettings",
    "FilterVerdict",
    "describe",
    "failure_endpoint",
    "guard_settings",
    "keep_group",
    "observe_unfiltered",
    "reset_guard",
]


KEPT = "kept"
MIN_STD = 1e-6
"""slime's ``check_reward_nonzero_std`` threshold."""


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
    config = config_from_args(args)  # the one type and range check of every tau_* key
    return FailureGuardSettings.from_config(config, getattr(args, "rollout_batch_size", None))


class _RunWindow(GuardWindow):
    """slime's window: ``keep_group`` is called as a plain function every group."""


def _run_window() -> _RunWindow:
    return shared_state().part(_RunWindow)


def reset_guard() -> None:
    """Forget the failure window and the redraw step (a new run in the same process, or a test)."""
    _run_window().reset()
    redraw_budget().reset()


def keep_group(args: Any, samples: list[Any], **kwargs: Any) -> Any:
    """slime's dynamic filter: keep a group whose non-failed episodes' rewards differ.

    Returns slime's ``DynamicFilterOutput`` (a :class:`FilterVerdict` outside slime); drop reasons are
    slime's ``zero_std_<reward>`` or ``failed_<endpoint>``; past the step's redraw bound a rejected group also
    carries ``keep_when_insufficient`` (slime keeps it) and is marked ``short_<reason>``.

    Raises:
        FailureGuardError: too many recent episodes FAILED on one endpoint (stops the run, by design).
        ConfigError: a guard key or ``tau_max_redraws`` has a bad value.
    """
    config = config_from_args(args)  # the one type and range check of every tau_* key
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
            describe(endpoint),
            reason,
            guard.last_error(endpoint),
        )
    elif len(ok) < 2 or statistics.stdev(ok) <= MIN_STD:
        reason = f"zero_std_{round(ok[0], 1)}"
    else:
        reason = None
    shape = StepShape.from_args(args, config.max_redraws)
    short = redraw_budget().judge(shape, current_rollout_id(), rejected=reason is not None)
    mark = KEPT if reason is None else f"{SHORT_PREFIX}{reason}" if short else reason
    for sample in samples:
        if isinstance(getattr(sample, "metadata", None), dict):
            sample.metadata["tau_group_filter"] = mark
    return _output(reason is None, reason, short)


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


def _output(keep: bool, reason: str | None, short: bool) -> Any:
    try:
        from slime.rollout.filter_hub.base_types import DynamicFilterOutput
    except ImportError:
        return FilterVerdict(keep, reason, short)
    if "keep_when_insufficient" not in getattr(DynamicFilterOutput, "__dataclass_fields__", {}):
        return DynamicFilterOutput(keep=keep or short, reason=reason)  # an older slime: keep it ourselves
    return DynamicFilterOutput(keep=keep, reason=reason, keep_when_insufficient=short)
