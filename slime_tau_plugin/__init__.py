"""slime-tau-plugin: train tool-using agents with RL on τ-bench inside slime.

Entry point for slime: ``--custom-generate-function-path slime_tau_plugin.generate.generate``.
Library use: ``EpisodeResources.for_config(config)`` (what a process shares, built once) and
``run_episode(resources, policy, task, sampling_params)`` (one episode, the typed ``EpisodeResult``).
Importing this package needs neither slime, SGLang nor τ: each is imported when first used.
"""

from .agent import TrainableAgentMixin, TrainableToolCallingAgent, agent_factory
from .choices import NLAssertionMode, PolicyApi, RewardMode, UserKind
from .config import TauConfig
from .engine import run_episode
from .envs import TaskRef
from .episode import EpisodeResult, SampleStatus, TerminationReason
from .errors import (
    ConfigError,
    ContextLengthError,
    EnvBackendError,
    FailureGuardError,
    MissingSettingError,
    PolicyConnectionError,
    PolicyError,
    PolicyHTTPError,
    PolicyProtocolError,
    TauPluginError,
    UserSimulatorError,
)
from .generate import generate
from .resources import EpisodeResources

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
