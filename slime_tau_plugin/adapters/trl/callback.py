"""The failure guard's stop inside TRL's training loop: a ``transformers.TrainerCallback``.

The rollout (``rollout.TauRollout``) feeds every generation batch, gathered over all processes, to the run's
failure guard (``reporting/failure_guard.FailureGuard``: slime's thresholds and one-line stop). When the guard
trips, the rollout logs the line and hands the error to :class:`GuardStop`; the batch still trains as it is (its
failed rows have advantage 0 and no trained token). At the end of that step the callback sets TRL's
``control.should_training_stop``, so the trainer logs and saves the step by its own rules and leaves its loop, and
``on_train_end`` raises the :class:`FailureGuardError`: ``trainer.train()`` ends with one line naming the endpoint,
never as a success. Every process saw the same gathered rows, so every process stops at the same step.

``TauRollout`` adds its callback to the trainer the first time TRL calls it (``trainer.add_callback``); passing
``callbacks=[rollout.callback]`` to ``GRPOTrainer`` does the same. transformers is imported only by
:func:`guard_stop_class`.
"""

from __future__ import annotations

import threading
from typing import Any

from slime_tau_plugin.reporting.failure_guard import FailureGuardError


class StopSignal:
    """The guard's verdict, set by the rollout (TRL's thread) and read by the callback."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._error: FailureGuardError | None = None

    def set(self, error: FailureGuardError) -> None:
        with self._lock:
            if self._error is None:
                self._error = error

    @property
    def error(self) -> FailureGuardError | None:
        with self._lock:
            return self._error


def guard_stop_class() -> type:
    """``GuardStop(signal)``: the ``TrainerCallback`` that stops TRL's loop on the guard's verdict."""
    from transformers import TrainerCallback

    class GuardStop(TrainerCallback):
        """Stops training after the step in which the failure guard tripped, then raises its error."""

        def __init__(self, signal: StopSignal) -> None:
            self.signal = signal

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if self.signal.error is not None:
                control.should_training_stop = True
            return control

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            error = self.signal.error
            if error is not None:
                raise error
            return control

    return GuardStop
