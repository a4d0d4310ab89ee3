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
    │   ├── JudgeError          the NL-assertion judge (an LLM endpoint τ calls while scoring) failed
    │   └── ResumeError         a suspended episode's state is malformed or does not replay to the same world
    ├── UserSimulatorError      the simulated user failed or timed out
    ├── EndpointDownError       an endpoint's breaker is open (``endpoints.py``); each client re-raises it as
    │                           its own error above, so an episode never ends on it
    ├── EpisodeDeadlineError    ``tau_episode_timeout_s`` passed while a request waited to retry: TRUNCATED
    └── UserTokenBudgetError    the LLM user's token budget (``tau_user_token_budget_*``) is spent: TRUNCATED

The failure guard's stop, ``FailureGuardError`` (a ``TauPluginError`` too), lives with the guard in
``reporting/failure_guard.py``: slime's dynamic filter and verl's trainer both raise it.

Each error names the collaborator it blames (``failed_endpoint``, a :class:`FailedEndpoint`): a FAILED
episode records it as a typed field, so nobody reads it back out of the message. Only ``net/http_errors.py``
classifies HTTP statuses; only ``generate()`` (and other front doors) catch broad ``Exception`` and turn it
into a FAILED sample.
"""

from __future__ import annotations

import enum
from typing import ClassVar

__all__ = [
    "ConfigError",
    "ContextLengthError",
    "EndpointDownError",
    "EnvBackendError",
    "EpisodeDeadlineError",
    "EpisodeWorkerError",
    "FailedEndpoint",
    "JudgeError",
    "MissingSettingError",
    "PolicyConnectionError",
    "PolicyError",
    "PolicyHTTPError",
    "PolicyProtocolError",
    "ResumeError",
    "TauPluginError",
    "UserSimulatorError",
    "UserTokenBudgetError",
    "failed_endpoint_of",
]


class FailedEndpoint(str, enum.Enum):
    """Which collaborator a FAILED episode failed on. Values are ``metadata["failed_endpoint"]``, the
    failure guard's keys and slime's drop reason ``failed_<value>``."""

    POLICY = "policy"
    USER = "user"
    JUDGE = "judge"
    ENV = "env"
    """The τ environment, or anything not blamed on a collaborator below."""
    CONFIG = "config"
    WORKER = "worker"
    """The episode worker process or Ray actor that played it died, twice (``tau_episode_workers``)."""
    CUSTOMER = "customer"
    """The simulated customer answered, but the review found an error of it that changed the outcome
    (``review/``): the endpoint works, what it plays does not."""


class TauPluginError(Exception):
    """Base of every error this package raises on purpose."""

    failed_endpoint: ClassVar[FailedEndpoint] = FailedEndpoint.ENV
    """Whom an episode that ends on this error blames (each branch of the tree sets its own)."""


class ConfigError(TauPluginError, ValueError):
    """Configuration or input that cannot work; the message says which field and what is expected."""

    failed_endpoint = FailedEndpoint.CONFIG


class MissingSettingError(ConfigError):
    """A required setting is absent (not wrong): ``generate`` returns FAILED samples that say which one.

    slime's plugin contract tests call ``generate`` with a minimal ``args`` (no router, no checkpoint) and
    expect a ``Sample`` back; a wrong value, by contrast, raises at once.
    """


class PolicyError(TauPluginError):
    """The policy server could not produce a generation."""

    failed_endpoint = FailedEndpoint.POLICY


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

    failed_endpoint = FailedEndpoint.JUDGE


class ResumeError(EnvBackendError):
    """A suspended episode cannot go on: its stored state is malformed, of another version, or replaying its
    action log on a fresh environment gave a different answer or database. The sample FAILS naming it; a
    silently different world is never played on."""


class UserSimulatorError(TauPluginError):
    """The user simulator failed after its retries."""

    failed_endpoint = FailedEndpoint.USER


class EndpointDownError(TauPluginError):
    """An endpoint failed every request for longer than ``tau_outage_tolerance_s`` (its breaker is open).

    Clients re-raise it as their own error type (a policy error, a user-simulator error, a judge error) so
    episodes end with the usual FAILED statuses; the message names the endpoint and how long it has been down.
    """


class EpisodeWorkerError(TauPluginError):
    """The worker process or Ray actor playing the episode died, on its first try and on its retry."""

    failed_endpoint = FailedEndpoint.WORKER


class EpisodeDeadlineError(TauPluginError):
    """The episode's wall-clock deadline (``tau_episode_timeout_s``) passed while it waited on a retry."""


class UserTokenBudgetError(TauPluginError):
    """The LLM user simulator's token budget for this rollout step or this run is spent (``net/user_budget.py``):
    the episode ends ``user_token_budget`` (TRUNCATED, not scored, not trained on), never on a cut conversation."""

    failed_endpoint = FailedEndpoint.USER


def failed_endpoint_of(exc: BaseException) -> FailedEndpoint:
    """The collaborator ``exc`` blames (the environment for an error that is not ours)."""
    return exc.failed_endpoint if isinstance(exc, TauPluginError) else FailedEndpoint.ENV
