"""The package's one exception tree.

    TauPluginError
    ├── ConfigError             bad configuration or input (names the field, the value, what was expected)
    │   └── MissingSettingError a required setting is absent (no policy URL, no tokenizer): a FAILED sample
    ├── PolicyError             the policy server (SGLang /generate) failed
    │   ├── PolicyHTTPError     non-2xx answer; carries ``status`` and ``body``
    │   │   └── ContextLengthError   HTTP 400 because prompt + max_new_tokens exceed the context
    │   ├── PolicyConnectionError    transport failure or timeout
    │   └── PolicyProtocolError      a 2xx answer whose JSON does not have SGLang's shape
    ├── EnvBackendError         a τ environment call (reset, step, reward) failed or timed out
    │   └── JudgeError          the NL-assertion judge (an LLM endpoint τ calls while scoring) failed
    ├── UserSimulatorError      the simulated user failed or timed out
    └── FailureGuardError       too many recent episodes FAILED for one endpoint: the run must stop

Only ``policy.py`` classifies HTTP statuses; only ``generate()`` (and other front doors) catch broad
``Exception`` and turn it into a FAILED sample.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ContextLengthError",
    "EnvBackendError",
    "FailureGuardError",
    "JudgeError",
    "MissingSettingError",
    "PolicyConnectionError",
    "PolicyError",
    "PolicyHTTPError",
    "PolicyProtocolError",
    "TauPluginError",
    "UserSimulatorError",
]


class TauPluginError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(TauPluginError, ValueError):
    """Configuration or input that cannot work; the message says which field and what is expected."""


class MissingSettingError(ConfigError):
    """A required setting is absent (not wrong): ``generate`` returns FAILED samples that say which one.

    slime's plugin contract tests call ``generate`` with a minimal ``args`` (no router, no checkpoint) and
    expect a ``Sample`` back; a wrong value, by contrast, raises at once.
    """


class PolicyError(TauPluginError):
    """The policy server could not produce a generation."""


class PolicyHTTPError(PolicyError):
    """The policy server answered with a non-2xx status."""

    def __init__(self, message: str, *, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ContextLengthError(PolicyHTTPError):
    """The server rejected the request because it would not fit the model's context."""


class PolicyConnectionError(PolicyError):
    """The policy server could not be reached, or did not answer in time."""


class PolicyProtocolError(PolicyError):
    """The policy server answered 2xx with a body that is not SGLang's /generate shape."""


class EnvBackendError(TauPluginError):
    """A τ environment call failed (exception or timeout)."""


class JudgeError(EnvBackendError):
    """τ's NL-assertion judge failed while scoring: an endpoint outage, not an environment bug (the failure
    guard names the judge)."""


class UserSimulatorError(TauPluginError):
    """The user simulator failed after its retries."""


class FailureGuardError(TauPluginError):
    """Raised from slime's dynamic filter (``group_filter.keep_group``) to stop the run.

    slime does not catch it: it ends the rollout step, and ``train.py``'s ``ray.get`` re-raises it, so a
    dead endpoint stops the job with one line naming it instead of redrawing groups forever.
    """

    def __init__(self, message: str, *, endpoint: str, failed: int, episodes: int) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.failed = failed
        self.episodes = episodes
