"""An env backend that fails on purpose: ``step``/``user_step`` raise or hang, ``reward`` raises (``TAU_FAULTS``).

``resources.py`` wraps the configured backend with :func:`with_faults` when ``TAU_FAULTS`` names an env kind
(``env_raise``, ``env_hang``, ``reward_raise``; see ``faults.py``); otherwise the backend is returned
unchanged and nothing here runs. The wrapper asks the process's injector at every call, so a changed or
cleared ``TAU_FAULTS`` takes effect at once. The faults happen inside τ's call, in the worker thread, so the
engine's own timeout and error translation (``run_blocking``) are what a test exercises.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.envs.base import (
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)
from slime_tau_plugin.tools.faults.spec import ENV_KINDS, FaultKind, FaultRule, process_injector, spec_from_env

if TYPE_CHECKING:
    from slime_tau_plugin.engine.episode import TerminationReason

_STEP_KINDS = frozenset({FaultKind.ENV_RAISE, FaultKind.ENV_HANG})


class InjectedFaultError(RuntimeError):
    """The failure an injected env fault raises (its message names the kind and ``TAU_FAULTS``)."""


def with_faults(backend: EnvBackend, timeout_s: float) -> EnvBackend:
    """``backend`` itself, or a :class:`FaultyBackend` around it when ``TAU_FAULTS`` names an env fault.

    ``timeout_s`` is ``tau_env_timeout_s``: an ``env_hang`` without its own seconds sleeps one second past it.

    Raises:
        ConfigError: ``TAU_FAULTS`` is not a valid spec.
    """
    spec = spec_from_env()
    if spec is None or not any(rule.kind in ENV_KINDS for rule in spec.for_target("env")):
        return backend
    return FaultyBackend(backend, timeout_s)


class FaultyBackend(EnvBackend):
    """Delegates everything to ``inner``; the sessions it opens fail as ``TAU_FAULTS`` says."""

    def __init__(self, inner: EnvBackend, timeout_s: float) -> None:
        self.inner = inner
        self.hang_s = timeout_s + 1.0

    def __getattr__(self, name: str) -> Any:  # backend-specific helpers (``name``, ``tasks``...)
        return getattr(self.inner, name)

    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> EnvSession:
        return FaultySession(self.inner.open(ref, options), self.hang_s)  # type: ignore[return-value]

    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        return self.inner.task_refs(domain, split)

    def script(self, ref: TaskRef) -> TaskScript:
        return self.inner.script(ref)

    def task_dump(self, ref: TaskRef) -> dict[str, Any]:
        return self.inner.task_dump(ref)

    def splits(self, domain: str) -> tuple[str, ...]:
        return self.inner.splits(domain)

    def package_version(self) -> dict[str, str]:
        return self.inner.package_version()


class FaultySession:
    """One episode's session with faults in ``step``, ``user_step`` and ``reward``; the rest is the inner one's.

    Not an :class:`EnvSession` subclass on purpose: that class's defaults (``user_tools``...) would hide the
    inner session's values from ``__getattr__``.
    """

    def __init__(self, inner: EnvSession, hang_s: float) -> None:
        self.inner = inner
        self.hang_s = hang_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def step(self, call: EnvToolCall) -> StepResult:
        self._maybe_fail(_STEP_KINDS, f"step {call.name}")
        return self.inner.step(call)

    def user_step(self, call: EnvToolCall) -> StepResult:
        self._maybe_fail(_STEP_KINDS, f"user_step {call.name}")
        return self.inner.user_step(call)

    def reward(self, termination: TerminationReason) -> RewardResult:
        self._maybe_fail(frozenset({FaultKind.REWARD_RAISE}), "reward")
        return self.inner.reward(termination)

    def _maybe_fail(self, kinds: frozenset[FaultKind], what: str) -> None:
        injector = process_injector("env")
        rule = injector.draw(kinds) if injector is not None else None
        if rule is None:
            return
        if rule.kind is FaultKind.ENV_HANG:
            time.sleep(self._hang_s(rule))  # in τ's worker thread: the engine's timeout fires first
            return
        raise InjectedFaultError(f"injected fault {rule.name} in {what} (TAU_FAULTS)")

    def _hang_s(self, rule: FaultRule) -> float:
        return self.hang_s if rule.param is None else rule.param
