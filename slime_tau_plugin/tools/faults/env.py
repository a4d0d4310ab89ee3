"""Env faults, installed from outside: the τ backend's sessions raise or hang on purpose (``env_raise``,
``env_hang``, ``reward_raise``; kinds in ``spec.py``).

A tool turns them on (the soak, ``slime-tau rollout`` under ``TAU_FAULTS``, tests) with
:func:`install_env_faults`: it installs a backend wrapper in the shared state (``engine/shared.py``), and
``EpisodeResources`` wraps the τ backend of every resources built from then on (resources are keyed by the
wrapper, so a config built before gets fresh ones). ``install_env_faults(None)`` turns them off for resources
built after. The spec is read once, at install, and each wrapper draws from the one injector it was installed
with; nothing reads ``TAU_FAULTS`` at an env step, and the engine never asks whether a fault is on. The faults
happen inside τ's call, in the worker thread, so the engine's own timeout and error translation
(``run_blocking``) are what a test exercises.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
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
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultKind, FaultRule, FaultSpec, spec_from_env

if TYPE_CHECKING:
    from slime_tau_plugin.engine.config.tau_config import TauConfig
    from slime_tau_plugin.engine.episode.result import TerminationReason

_STEP_KINDS = frozenset({FaultKind.ENV_RAISE, FaultKind.ENV_HANG})


class InjectedFaultError(RuntimeError):
    """The failure an injected env fault raises (its message names the kind and ``TAU_FAULTS``)."""


def install_env_faults(spec: FaultSpec | None) -> FaultInjector | None:
    """Wrap the τ backend of every resources built from now on with ``spec``'s env faults; None, or a spec with
    no env fault, uninstalls. Returns the installed injector (its counts are what was injected), or None.
    """
    if spec is None or not spec.for_target("env"):
        shared_state().install_backend_wrapper(None)
        return None
    injector = FaultInjector(spec, "env")
    shared_state().install_backend_wrapper(EnvFaults(injector))
    return injector


def install_env_faults_from_environ(environ: Mapping[str, str] | None = None) -> FaultInjector | None:
    """:func:`install_env_faults` with the spec ``TAU_FAULTS`` holds now (seeded by ``TAU_FAULTS_SEED``), read once.

    Raises:
        ConfigError: a bad spec or seed.
    """
    return install_env_faults(spec_from_env(environ))


@dataclass(frozen=True, slots=True, eq=False)
class EnvFaults:
    """The backend wrapper :func:`install_env_faults` installs (hashed by identity: it keys the resources)."""

    injector: FaultInjector

    def __call__(self, backend: EnvBackend, config: TauConfig) -> EnvBackend:
        """``backend`` in a :class:`FaultyBackend`; an ``env_hang`` without its own seconds sleeps one second past
        ``tau_env_timeout_s``."""
        return FaultyBackend(backend, config.env_timeout_s, self.injector)


class FaultyBackend(EnvBackend):
    """Delegates everything to ``inner``; the sessions it opens fail as ``injector`` draws."""

    def __init__(self, inner: EnvBackend, timeout_s: float, injector: FaultInjector) -> None:
        self.inner = inner
        self.hang_s = timeout_s + 1.0
        self.injector = injector

    def __getattr__(self, name: str) -> Any:  # backend-specific helpers (``name``, ``tasks``...)
        return getattr(self.inner, name)

    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> EnvSession:
        return FaultySession(self.inner.open(ref, options), self.hang_s, self.injector)  # type: ignore[return-value]

    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        return self.inner.task_refs(domain, split)

    def build_domain(self, domain: str, options: EnvOptions | None = None) -> None:
        self.inner.build_domain(domain, options)

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

    def __init__(self, inner: EnvSession, hang_s: float, injector: FaultInjector) -> None:
        self.inner = inner
        self.hang_s = hang_s
        self.injector = injector

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
        rule = self.injector.draw(kinds)
        if rule is None:
            return
        if rule.kind is FaultKind.ENV_HANG:
            time.sleep(self._hang_s(rule))  # in τ's worker thread: the engine's timeout fires first
            return
        raise InjectedFaultError(f"injected fault {rule.name} in {what} (TAU_FAULTS)")

    def _hang_s(self, rule: FaultRule) -> float:
        return self.hang_s if rule.param is None else rule.param
