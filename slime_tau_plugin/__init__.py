"""slime-tau-plugin: train tool-using agents with RL on τ-bench inside slime.

Entry point for slime: ``--custom-generate-function-path slime_tau_plugin.generate.generate``.
Importing this package needs neither slime, SGLang nor τ: each is imported when first used.
"""

from .agent import TrainableAgentMixin, TrainableToolCallingAgent, agent_factory
from .config import TauConfig
from .envs import TaskRef
from .episode import EpisodeResult, SampleStatus, TerminationReason
from .errors import (
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
from .generate import generate

__all__ = [
    "ConfigError",
    "ContextLengthError",
    "EnvBackendError",
    "EpisodeResult",
    "MissingSettingError",
    "PolicyConnectionError",
    "PolicyError",
    "PolicyHTTPError",
    "PolicyProtocolError",
    "SampleStatus",
    "TaskRef",
    "TauConfig",
    "TauPluginError",
    "TerminationReason",
    "TrainableAgentMixin",
    "TrainableToolCallingAgent",
    "UserSimulatorError",
    "agent_factory",
    "generate",
]

__version__ = "0.1.0"
