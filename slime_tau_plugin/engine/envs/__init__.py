"""Environment backends behind one interface (``base.py``), chosen by benchmark name: the one table.

:data:`BENCHMARKS` is pure data: a benchmark name (``tau_benchmark``) maps to the dotted path of its
backend class and the domains it serves. Config checks names against it without importing τ; the
backend class is imported only when its benchmark is used, and imports its τ package when constructed
(a ConfigError with the install steps if it is missing). A new τ version is one module under ``envs/``
and one line here. The constructed backends are the shared state's (``shared.py``), one per name.

May import: ``net`` (τ²'s judge replicas), ``episode`` (values), ``shared``, ``errors``, ``choices``; never
``config`` (which reads this table) or anything above it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from slime_tau_plugin.engine.envs.base import (
    STOP_MARKER,
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    FirstMove,
    GoldAction,
    MessageHistory,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.shared import shared_state

__all__ = [
    "BENCHMARKS",
    "STOP_MARKER",
    "BenchmarkSpec",
    "EnvBackend",
    "EnvOptions",
    "EnvSession",
    "EnvToolCall",
    "FirstMove",
    "GoldAction",
    "MessageHistory",
    "RewardResult",
    "StepResult",
    "TaskRef",
    "TaskScript",
    "check_domain",
    "get_backend",
    "installed_domains",
]


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """One τ version: where its backend lives and which domains it serves."""

    backend: str
    """``module:Class`` of its :class:`EnvBackend`, imported on first use."""
    domains: tuple[str, ...]
    """Domains known without importing τ (those with tasks in every release); config accepts them at once."""
    registry: str | None = None
    """``module:function`` listing the domains the *installed* τ registers (asked only for a domain not in
    :attr:`domains`, so importing the package never imports τ); None = :attr:`domains` is the whole list."""
    max_errors: int | None = None
    """The harness's tool-error limit (τ²: ``Orchestrator(max_errors=10)``; v1 has none)."""
    max_steps: int | None = None
    """The harness's step limit in its own unit (τ²: ``max_steps=100`` messages); v1 counts model turns
    (``max_num_steps=30``), which is ``tau_max_turns``."""
    agent_error_rule: str = "off"
    """The default ``tau_agent_error_rule`` (``choices.AgentErrorRule`` value)."""


BENCHMARKS: dict[str, BenchmarkSpec] = {
    "tau1": BenchmarkSpec("slime_tau_plugin.engine.envs.tau1:Tau1Backend", ("airline", "retail")),
    "tau2": BenchmarkSpec(
        "slime_tau_plugin.engine.envs.tau2:Tau2Backend",
        ("airline", "retail", "telecom"),
        registry="slime_tau_plugin.engine.envs.tau2_data:installed_domains",
        max_errors=10,
        max_steps=100,
        agent_error_rule="empty",
    ),
}


def installed_domains(benchmark: str) -> tuple[str, ...]:
    """The domains the installed τ registers for ``benchmark`` (imports τ when the table names a registry).

    Raises:
        ConfigError: unknown benchmark, or its τ package is not installed (with how to install it).
    """
    spec = BENCHMARKS.get(benchmark)
    if spec is None:
        raise ConfigError(f"benchmark={benchmark!r} is unknown; expected one of {', '.join(sorted(BENCHMARKS))}")
    if spec.registry is None:
        return spec.domains
    module_name, _, function = spec.registry.partition(":")
    return tuple(getattr(importlib.import_module(module_name), function)())


def check_domain(benchmark: str, domain: str) -> None:
    """Refuse a benchmark or a domain τ does not have; τ's registry is asked only for a domain outside the table.

    Raises:
        ConfigError: one line naming the value and the installed domains.
    """
    spec = BENCHMARKS.get(benchmark)
    if spec is None:
        raise ConfigError(f"benchmark={benchmark!r} is unknown; expected one of {', '.join(sorted(BENCHMARKS))}")
    if domain in spec.domains:
        return
    installed = installed_domains(benchmark)
    if domain not in installed:
        listed = [d for d in spec.domains if d in installed] + sorted(set(installed) - set(spec.domains))
        raise ConfigError(f"domain (benchmark {benchmark})={domain!r} is unknown; expected one of {', '.join(listed)}")


def get_backend(name: str) -> EnvBackend:
    """The process-wide backend for ``name`` (``tau1`` or ``tau2``), created on first use.

    Raises:
        ConfigError: unknown name, or its τ package is not installed (with how to install it).
    """
    if name not in BENCHMARKS:
        raise ConfigError(f"benchmark={name!r} is unknown; expected one of {', '.join(sorted(BENCHMARKS))}")
    return shared_state().backends.get(name, lambda: _new_backend(name))


def _new_backend(name: str) -> EnvBackend:
    module_name, _, class_name = BENCHMARKS[name].backend.partition(":")
    return getattr(importlib.import_module(module_name), class_name)()
