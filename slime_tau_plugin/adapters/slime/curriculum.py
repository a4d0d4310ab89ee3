"""The curriculum inside a slime run, through slime's own data-source hook (off unless the flag names it)::

    --data-source-path slime_tau_plugin.adapters.slime.curriculum.TauCurriculumDataSource

``TauCurriculumDataSource`` is slime's ``RolloutDataSourceWithBuffer`` with one step added where fresh groups
come from the dataset: each group is kept or skipped by its task's weight (``reporting/curriculum_rule.py``:
a task always solved or never solved over its last ``tau_curriculum_window`` episodes has weight
``tau_curriculum_floor``; the weights come from the run's per-task record, ``task_record.py``). slime's buffer
(groups handed back by partial rollouts) is never weighted: those episodes are already under way. Everything
else (dataset, shuffling, epochs, ``save``/``load`` of slime's own offsets) is slime's.

The class is built on first access (a module ``__getattr__``), so importing this module imports no slime; slime's
``load_function`` reads the attribute. How: ``WithBuffer.get_samples`` takes from its buffer, then calls
``super().get_samples`` for the rest; :func:`curriculum_data_source` puts :class:`CurriculumMixin` between it and
slime's ``RolloutDataSource`` in the class's order, so only the fresh draws pass through the mixin.
"""

from __future__ import annotations

import logging
from typing import Any

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.adapters.slime.task_record import run_record
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.reporting.curriculum_rule import CurriculumDraws, CurriculumSettings
from slime_tau_plugin.reporting.task_history import task_of

logger = logging.getLogger(__name__)

__all__ = ["CurriculumMixin", "curriculum_data_source"]

CLASS_NAME = "TauCurriculumDataSource"
ALL_SAMPLES_HOOK = "slime_tau_plugin.adapters.slime.all_samples.process_all_samples"


class CurriculumMixin:
    """The fresh-draw step: ask the base class for groups and keep each by its task's weight."""

    args: Any

    def __init__(self, args: Any) -> None:
        super().__init__(args)  # type: ignore[call-arg]  # slime's RolloutDataSource(args)
        config = config_from_args(args)
        _check_record_hook(args)
        run = run_record(args)
        if run is None:
            raise ConfigError(
                f"{CLASS_NAME} needs a run folder for its per-task record: set tau_task_record_dir or slime's --save"
            )
        settings = CurriculumSettings(
            config.curriculum_window, config.curriculum_floor, int(getattr(args, "rollout_seed", 0) or 0)
        )
        run.draws = CurriculumDraws(settings)
        self._tau_run = run
        logger.info(
            "tau curriculum on: tasks saturated over %d episodes drawn at weight %.2f (record %s, %d tasks)",
            settings.window,
            settings.floor,
            run.path,
            len(run.record.tasks),
        )

    def get_samples(self, num_samples: int) -> list[list[Any]]:
        """``num_samples`` fresh groups, each kept with its task's weight (skipped ones are drawn past)."""
        run, draws = self._tau_run, self._tau_run.draws
        assert draws is not None  # set in __init__
        kept: list[list[Any]] = []
        looks, limit = 0, draws.max_looks(num_samples)
        while len(kept) < num_samples:
            batch = super().get_samples(num_samples - len(kept))  # type: ignore[misc]
            if not batch:
                break
            for group in batch:
                looks += 1
                if looks > limit:
                    kept.append(group)  # past the bound: take groups as they come
                    continue
                with run.lock:
                    stats = run.record.tasks.get(_task_of(group, self.args))
                if draws.keep(stats, _group_index(group, looks)):
                    kept.append(group)
        return kept


def _check_record_hook(args: Any) -> None:
    """The record is fed by our all-samples hook: without it every task would stay at full weight forever.

    Raises:
        ConfigError: slime's ``--rollout-all-samples-process-path`` is unset.
    """
    hook = getattr(args, "rollout_all_samples_process_path", ALL_SAMPLES_HOOK)
    if hook is None:
        raise ConfigError(
            f"{CLASS_NAME} reads the per-task record that the all-samples hook writes; add "
            f"--rollout-all-samples-process-path {ALL_SAMPLES_HOOK}"
        )
    if hook != ALL_SAMPLES_HOOK:
        logger.warning(
            "tau curriculum: --rollout-all-samples-process-path is %s; the per-task record is written only if it "
            "calls %s",
            hook,
            ALL_SAMPLES_HOOK,
        )


def curriculum_data_source(with_buffer: type, base: type) -> type:
    """The data-source class: ``with_buffer`` (slime's ``RolloutDataSourceWithBuffer``), then the mixin, then
    ``base`` (slime's ``RolloutDataSource``, which ``with_buffer`` subclasses)."""
    return type(CLASS_NAME, (with_buffer, CurriculumMixin, base), {"__module__": __name__})


def _task_of(group: list[Any], args: Any) -> str | None:
    """The task a fresh group plays (its first sample's metadata, as the rows of ``slime-tau prepare`` carry it)."""
    meta = getattr(group[0], "metadata", None) if group else None
    default = f"{getattr(args, 'tau_benchmark', None) or 'tau2'}/{getattr(args, 'tau_domain', None) or 'retail'}"
    where = task_of(meta, default)
    return None if where is None else f"{where[0]}/{where[1]}"


def _group_index(group: list[Any], fallback: int) -> int:
    index = getattr(group[0], "group_index", None) if group else None
    return index if isinstance(index, int) else fallback


def __getattr__(name: str) -> Any:
    """``TauCurriculumDataSource``: built from slime's classes on first access (slime is imported here only)."""
    if name != CLASS_NAME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from slime.rollout.data_source import RolloutDataSource, RolloutDataSourceWithBuffer

    cls = curriculum_data_source(RolloutDataSourceWithBuffer, RolloutDataSource)
    globals()[name] = cls
    return cls
