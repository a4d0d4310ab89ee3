"""Environment backends behind one interface (``base.py``), chosen by benchmark name.

The registry is pure data: a benchmark name maps to the dotted path of its backend class, imported
only when that benchmark is used; each backend imports its τ package when constructed and raises a
ConfigError with the install steps if it is missing.
"""

from __future__ import annotations

import importlib
import threading

from ..errors import ConfigError
from .base import (
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    GoldAction,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)

__all__ = [
    "BACKENDS",
    "EnvBackend",
    "EnvOptions",
    "EnvSession",
    "EnvToolCall",
    "GoldAction",
    "RewardResult",
    "StepResult",
    "TaskRef",
    "TaskScript",
    "get_backend",
]

BACKENDS: dict[str, str] = {
    "tau1": "slime_tau_plugin.envs.tau1:Tau1Backend",
    "tau2": "slime_tau_plugin.envs.tau2:Tau2Backend",
}

_instances: dict[str, EnvBackend] = {}
_lock = threading.Lock()


def get_backend(name: str) -> EnvBackend:
    """The process-wide backend for ``name`` (``tau1`` or ``tau2``), created on first use.

    Raises:
        ConfigError: unknown name, or its τ package is not installed (with how to install it).
    """
    with _lock:
        if name in _instances:
            return _instances[name]
        if name not in BACKENDS:
            raise ConfigError(f"benchmark={name!r} is unknown; expected one of {', '.join(sorted(BACKENDS))}")
        module_name, _, class_name = BACKENDS[name].partition(":")
        backend = getattr(importlib.import_module(module_name), class_name)()
        _instances[name] = backend
        return backend
