"""slime-tau-plugin: train tool-using agents with RL on τ-bench inside slime.

Entry point for slime: ``--custom-generate-function-path slime_tau_plugin.adapters.slime.generate.generate``.
Library use: ``EpisodeResources.for_config(config)`` (what a process shares, built once) and
``run_episode(resources, policy, task, sampling_params)`` (one episode, the typed ``EpisodeResult``).
Importing this package needs neither slime, SGLang nor τ: each is imported when first used, and no adapter is loaded
until ``generate`` is asked for (``import slime_tau_plugin.engine`` loads the engine alone).
"""

import sys
import types

from slime_tau_plugin.engine.agent import TrainableAgentMixin, TrainableToolCallingAgent, agent_factory
from slime_tau_plugin.engine.choices import NLAssertionMode, PolicyApi, RewardMode, UserKind
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.result import EpisodeResult, SampleStatus, TerminationReason
from slime_tau_plugin.engine.errors import (
    ConfigError,
    ContextLengthError,
    EnvBackendError,
    MissingSettingError,
    PolicyConnectionError,
    PolicyError,
    PolicyHTTPError,
    PolicyProtocolError,
    TauPluginError,
    UserSimulatorError,
)
from slime_tau_plugin.engine.loop.run import run_episode
from slime_tau_plugin.engine.resources import EpisodeResources

__all__ = [
    "ConfigError",
    "ContextLengthError",
    "EnvBackendError",
    "EpisodeResources",
    "EpisodeResult",
    "FailureGuardError",
    "MissingSettingError",
    "NLAssertionMode",
    "PolicyApi",
    "PolicyConnectionError",
    "PolicyError",
    "PolicyHTTPError",
    "PolicyProtocolError",
    "RewardMode",
    "SampleStatus",
    "TaskRef",
    "TauConfig",
    "TauPluginError",
    "TerminationReason",
    "TrainableAgentMixin",
    "TrainableToolCallingAgent",
    "UserKind",
    "UserSimulatorError",
    "agent_factory",
    "generate",
    "run_episode",
]

__version__ = "0.1.0"


def __getattr__(name: str):
    """slime's names (``generate``, ``FailureGuardError``) are imported on first use: importing the engine loads no
    adapter."""
    if name == "generate":
        from slime_tau_plugin.adapters.slime.generate import generate

        return generate
    if name == "FailureGuardError":
        from slime_tau_plugin.adapters.slime.group_filter import FailureGuardError

        return FailureGuardError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """The package's module type: ``slime_tau_plugin.generate`` names the function, as ``__all__`` says.

    The submodule of the same name (``slime_tau_plugin/generate.py``, the path slime's flag names) would otherwise
    replace it once imported: the import system records a submodule as its package's attribute.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if name == "generate" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
