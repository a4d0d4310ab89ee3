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
from typing import Any

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
from slime_tau_plugin.engine.envs.names import DomainNames
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
    "DomainNames",
    "check_domain",
    "check_split",
    "domain_names",
    "get_backend",
    "installed_domains",
    "known_splits",
]


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """One τ version: where its backend lives and which domains it serves."""

    backend: str
    """``module:Class`` of its :class:`EnvBackend`, imported on first use."""
    domains: tuple[str, ...]
    """Domains known without importing τ (those with tasks in every release); config accepts them at once."""
    names: str
    """``module:function`` reading the installed τ's domain and split names from its files without importing
    it (``names.py``); it returns None where it cannot be sure, and then :attr:`registry` is asked."""
    registry: str | None = None
    """``module:function`` listing the domains the *installed* τ registers (imports τ: asked only when
    :attr:`names` cannot say); None = :attr:`domains` is the whole list."""
    max_errors: int | None = None
    """The harness's tool-error limit (τ²: ``Orchestrator(max_errors=10)``; v1 has none)."""
    max_steps: int | None = None
    """The harness's step limit in its own unit (τ²: ``max_steps=100`` messages); v1 counts model turns
    (``max_num_steps=30``), which is ``tau_max_turns``."""
    agent_error_rule: str = "off"
    """The default ``tau_agent_error_rule`` (``choices.AgentErrorRule`` value)."""


BENCHMARKS: dict[str, BenchmarkSpec] = {
    "tau1": BenchmarkSpec(
        "slime_tau_plugin.engine.envs.tau1:Tau1Backend",
        ("airline", "retail"),
        names="slime_tau_plugin.engine.envs.names:tau1_names",
    ),
    "tau2": BenchmarkSpec(
        "slime_tau_plugin.engine.envs.tau2:Tau2Backend",
        ("airline", "retail", "telecom"),
        names="slime_tau_plugin.engine.envs.names:tau2_names",
        registry="slime_tau_plugin.engine.envs.tau2_data:installed_domains",
        max_errors=10,
        max_steps=100,
        agent_error_rule="empty",
    ),
}


def _spec(benchmark: str) -> BenchmarkSpec:
    spec = BENCHMARKS.get(benchmark)
    if spec is None:
        raise ConfigError(f"benchmark={benchmark!r} is unknown; expected one of {', '.join(sorted(BENCHMARKS))}")
    return spec


def _call(target: str) -> Any:
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)()


def domain_names(benchmark: str) -> DomainNames | None:
    """The installed τ's domains and splits as read from its files (``names.py``; never imports τ), or None.

    Raises:
        ConfigError: unknown benchmark.
    """
    return _call(_spec(benchmark).names)


def installed_domains(benchmark: str) -> tuple[str, ...]:
    """The domains the installed τ registers for ``benchmark``: read from its files, else from its registry.

    Raises:
        ConfigError: unknown benchmark, or its τ package is not installed (with how to install it).
    """
    spec = _spec(benchmark)
    names = domain_names(benchmark)
    if names is not None:
        return names.domains
    if spec.registry is None:
        return spec.domains
    return tuple(_call(spec.registry))


def check_domain(benchmark: str, domain: str) -> None:
    """Refuse a benchmark or a domain τ does not have, without importing τ where its files can say.

    Raises:
        ConfigError: one line naming the value and the installed domains.
    """
    spec = _spec(benchmark)
    if domain in spec.domains:
        return
    installed = installed_domains(benchmark)
    if domain not in installed:
        listed = [d for d in spec.domains if d in installed] + [d for d in installed if d not in spec.domains]
        raise ConfigError(f"domain (benchmark {benchmark})={domain!r} is unknown; expected one of {', '.join(listed)}")


def known_splits(benchmark: str, domain: str) -> tuple[str, ...] | None:
    """The domain's split names read from τ's files, or None where they cannot tell (then τ itself checks)."""
    names = domain_names(benchmark)
    return None if names is None else names.splits.get(domain)


def check_split(benchmark: str, domain: str, split: str) -> None:
    """Refuse a split the domain's files do not list, without importing τ (the backend checks again on load).

    Raises:
        ConfigError: one line naming the split, the task set and the valid splits.
    """
    check_domain(benchmark, domain)
    valid = known_splits(benchmark, domain)
    if valid is not None and split not in valid:
        raise ConfigError(f"split={split!r} is unknown for {benchmark}/{domain}; expected one of {', '.join(valid)}")


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
