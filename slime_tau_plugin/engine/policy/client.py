"""The policy seam: what the episode engine asks of the model (``PolicyClient``) and what it gets back.

Clients, one per wire protocol, each the only reader of its response shape:

- ``sglang.SGLangPolicy``: SGLang's native ``POST /generate`` (slime's engines and router).
- ``openai.OpenAICompletionsPolicy``: an OpenAI-compatible ``POST /v1/completions`` with a token-id
  prompt and log-probs (vLLM; SGLang's OpenAI endpoint).
- ``nemo_rl.NeMoRLPolicy``: NeMo RL's vLLM servers (``/tokenize`` and ``/v1/chat/completions`` with its
  ``required_prefix_token_ids``), several at once.
- ``adapters/verl/policy.py``'s ``VerlPolicy``: verl's ``server_manager`` (no HTTP of ours).

The HTTP clients share :func:`post_json_with_retries`: connection failures, timeouts, 429 and 5xx are
retried with backoff (generation is stateless, so a retry is safe; ``net/http_errors.py`` classifies the
status); 4xx is never retried, and a 400 about the context length becomes :class:`ContextLengthError`, and a
404 names what to check (:func:`not_found_hint`). An engine abort is a ``finish_reason``, not an exception.
The one-server clients (SGLang, completions) share :meth:`HTTPPolicyClient.generate` too and write only their
request and read only their answer; NeMo RL's, over several servers, posts with :func:`post_json_on_replicas`.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from slime_tau_plugin.engine.choices import PolicyApi
from slime_tau_plugin.engine.errors import (
    ContextLengthError,
    EndpointDownError,
    MissingSettingError,
    PolicyConnectionError,
    PolicyHTTPError,
    PolicyProtocolError,
)
from slime_tau_plugin.engine.net.endpoints import EndpointGuard, EndpointRole, GuardSettings, guard_for
from slime_tau_plugin.engine.net.http_errors import HTTPFailure, classify_status
from slime_tau_plugin.engine.net.loop_http import LoopBoundHTTP, TransportError
from slime_tau_plugin.engine.net.replicas import ReplicaSet
from slime_tau_plugin.engine.net.retry import RetrySettings, retry_async, retry_on_replicas

if TYPE_CHECKING:
    from slime_tau_plugin.engine.config.tau_config import TauConfig

POLICY_CLIENTS: dict[PolicyApi, str] = {
    PolicyApi.SGLANG: "slime_tau_plugin.engine.policy.sglang:SGLangPolicy",
    PolicyApi.OPENAI_COMPLETIONS: "slime_tau_plugin.engine.policy.openai:OpenAICompletionsPolicy",
    PolicyApi.NEMO_RL: "slime_tau_plugin.engine.policy.nemo_rl:NeMoRLPolicy",
}
"""``tau_policy_api`` -> the client class (``module:Class`` with a ``from_config(config)`` constructor),
imported when chosen. A new wire protocol is a ``policy_<name>.py`` (an :class:`HTTPPolicyClient` with its
``path``, ``request`` and ``result``) and one line here (plus its ``PolicyApi`` member). verl's client is
injected by its front door, so it is not listed."""


class FinishReason(str, enum.Enum):
    """Why one generation ended (SGLang's ``meta_info.finish_reason.type``)."""

    STOP = "stop"
    """A stop token or string: the turn is complete."""
    LENGTH = "length"
    """``max_new_tokens`` reached: the turn was cut."""
    ABORT = "abort"
    """The engine aborted the request (slime's ``/abort_request`` at the end of a rollout step)."""


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """One generation as the server produced it."""

    output_ids: tuple[int, ...]
    """Sampled ids, stop token included (SGLang and vLLM keep it in the output ids)."""
    log_probs: tuple[float, ...]
    """One log-prob per output id."""
    finish_reason: FinishReason
    meta_info: dict[str, Any]
    """SGLang-shaped ``meta_info`` (``finish_reason``, ``prompt_tokens``, ``weight_version``, ...): slime's
    ``Sample.append_response_tokens`` reads it; clients of other protocols fill the keys they can."""


class PolicyClient(Protocol):
    """What the episode engine needs from the model being trained: ids in, sampled ids and log-probs out.

    Implementations classify their own transport errors into ``PolicyError`` subclasses and report an
    engine abort as ``FinishReason.ABORT``, never as an exception.
    """

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult: ...


class HTTPPolicyClient:
    """What every HTTP policy client shares: one connection-reusing session (``net/loop_http.py``) and retries."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        retry: RetrySettings | None = None,
        max_connections: int = 4096,
        guard: EndpointGuard | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetrySettings()
        self.guard = guard
        """The endpoint's shared slots, outage clock and breaker (``endpoints.py``); None = plain retries."""
        self._http = LoopBoundHTTP(
            self.base_url, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, max_connections=max_connections
        )

    @classmethod
    def from_config(cls, config: TauConfig) -> HTTPPolicyClient:
        """The client ``config`` describes (URL, timeout, retries, in-flight bound, outage tolerance)."""
        return cls(config.policy_url or "", **http_settings(config))

    path = "/generate"
    """The route of the protocol's one request."""

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult:
        """POST the protocol's request for ``input_ids`` (:meth:`request`) to :attr:`path` with retries and
        return its answer typed (:meth:`result`); one flow, so every protocol retries and fails alike.

        Raises:
            ContextLengthError: HTTP 400 about the context length (not retried).
            PolicyHTTPError: any other non-2xx after retries (5xx) or at once (4xx; a 404 adds :meth:`not_found`).
            PolicyConnectionError: transport failures or timeouts after retries.
            PolicyProtocolError: a 2xx body that is not the protocol's shape.
        """
        payload = self.request(input_ids, sampling_params, rid)
        with not_found_hint(self.not_found()):
            body = await post_json_with_retries(self._http, self.path, payload, headers, self.retry, rid, self.guard)
        return self.result(body, rid)

    def request(self, input_ids: Sequence[int], sampling_params: dict[str, Any], rid: str | None) -> dict[str, Any]:
        """The JSON body that asks for one generation from ``input_ids`` (each protocol writes its own)."""
        raise NotImplementedError

    def result(self, body: Any, rid: str | None) -> GenerateResult:
        """The decoded 2xx answer as a :class:`GenerateResult` (each protocol reads its own)."""
        raise NotImplementedError

    def not_found(self) -> str | None:
        """What to check when the server answers 404 (None: the error as the server wrote it)."""
        return None

    async def aclose(self) -> None:
        await self._http.aclose()


def policy_client(config: TauConfig) -> PolicyClient:
    """The HTTP policy client ``tau_policy_api`` names, for ``tau_policy_url``.

    Raises:
        MissingSettingError: no policy URL is configured.
    """
    require_policy_url(config)
    module, _, name = POLICY_CLIENTS[config.policy_api].partition(":")
    return getattr(importlib.import_module(module), name).from_config(config)


def require_policy_url(config: TauConfig) -> None:
    """Raises MissingSettingError unless config names a policy server (slime and the CLI need one)."""
    if not config.policy_url:
        raise MissingSettingError(
            "no policy server: set tau_policy_url or slime's --sglang-router-ip/--sglang-router-port"
        )


def http_settings(config: TauConfig) -> dict[str, Any]:
    """The :class:`HTTPPolicyClient` keywords ``config`` sets, for every client's ``from_config``: timeout,
    retries, and the process's guard of the policy URL (in-flight bound, outage tolerance)."""
    url = config.policy_url or ""
    settings = GuardSettings(config.policy_max_inflight, config.outage_tolerance_s)
    return {
        "timeout_s": config.policy_timeout_s,
        "retry": RetrySettings(attempts=config.policy_retries),
        "guard": guard_for(EndpointRole.POLICY, url, settings),
    }


class _TransientHTTPError(PolicyHTTPError):
    """A 5xx or 429 answer: retried (after its ``Retry-After``), then surfaced as PolicyHTTPError."""

    def __init__(self, message: str, failure: HTTPFailure, body: str) -> None:
        super().__init__(message, status=failure.status, body=body)
        self.retry_after = failure.retry_after


class _CutBodyError(PolicyProtocolError):
    """A 2xx answer whose body is not JSON (cut short): retried, then surfaced as PolicyProtocolError."""


async def _post_once(
    http: LoopBoundHTTP, path: str, payload: Any, headers: dict[str, str] | None, rid: str | None
) -> Any:
    """One POST: the decoded JSON of a 2xx answer, else the error :func:`post_json_with_retries` retries or raises."""
    try:
        answer = await http.post_json(path, payload, headers)
    except TransportError as exc:
        raise PolicyConnectionError(str(exc)) from exc
    failure = classify_status(answer.status, answer.text, answer.retry_after)
    if failure is not None and failure.is_transient:
        raise _TransientHTTPError(f"POST {path} answered {failure.status} (rid={rid})", failure, answer.text)
    if failure is not None:
        raise _final_error(failure, answer.text, rid, path)
    try:
        return json.loads(answer.text)
    except json.JSONDecodeError as exc:  # a body cut short (a proxy, a restarting server): try again
        raise _CutBodyError(f"{path} answered non-JSON (rid={rid}): {answer.text[:200]!r}") from exc


_RETRIED = (PolicyConnectionError, _TransientHTTPError, _CutBodyError)


async def post_json_with_retries(
    http: LoopBoundHTTP,
    path: str,
    payload: Any,
    headers: dict[str, str] | None,
    retry: RetrySettings,
    rid: str | None,
    guard: EndpointGuard | None = None,
) -> Any:
    """POST ``payload`` to the policy server and return the decoded JSON of its 2xx answer.

    Raises:
        ContextLengthError: HTTP 400 about the context length (not retried).
        PolicyHTTPError: any other non-2xx after retries (5xx, 429) or at once (4xx).
        PolicyConnectionError: transport failures or timeouts after retries, or the endpoint is down.
        PolicyProtocolError: a 2xx body that is not JSON.
    """
    what = f"rid={rid} {path}"
    with _final_errors():
        return await retry_async(lambda: _post_once(http, path, payload, headers, rid), retry, _RETRIED, what, guard)


async def post_json_on_replicas(
    https: Mapping[str, LoopBoundHTTP],
    path: str,
    payload: Callable[[str], Any],
    headers: dict[str, str] | None,
    retry: RetrySettings,
    rid: str | None,
    replicas: ReplicaSet,
    sent_to: Callable[[str], None] | None = None,
) -> Any:
    """:func:`post_json_with_retries` over several servers of one policy (``https``: one client per URL): each
    try goes where ``replicas.pick`` says (``net/replicas.py``: fewest in flight, failing ones skipped), with
    ``payload(url)`` as its body; ``sent_to(url)`` is told which server answered.

    Raises:
        as :func:`post_json_with_retries`.
    """

    async def once(guard: EndpointGuard | None) -> Any:
        url = guard.url if guard is not None else next(iter(https))
        body = await _post_once(https[url], path, payload(url), headers, rid)
        if sent_to is not None:
            sent_to(url)
        return body

    with _final_errors():
        return await retry_on_replicas(once, retry, _RETRIED, f"rid={rid} {path}", replicas)


@contextlib.contextmanager
def not_found_hint(hint: str | None) -> Iterator[None]:
    """A 404 from the policy server (it lacks the route or the model) as the same PolicyHTTPError with ``hint``, what
    to check, added; every other error as it is (also a 404 when ``hint`` is None)."""
    try:
        yield
    except PolicyHTTPError as exc:
        if hint is None or exc.status != 404:
            raise
        raise PolicyHTTPError(f"{exc}; {hint}", status=exc.status, body=exc.body) from exc


@contextlib.contextmanager
def _final_errors() -> Iterator[None]:
    """The retried errors, once their tries are spent, as the public errors callers catch."""
    try:
        yield
    except _TransientHTTPError as exc:
        raise PolicyHTTPError(str(exc), status=exc.status, body=exc.body) from exc
    except _CutBodyError as exc:
        raise PolicyProtocolError(str(exc)) from exc
    except EndpointDownError as exc:
        raise PolicyConnectionError(str(exc)) from exc


def _final_error(failure: HTTPFailure, body: str, rid: str | None, path: str = "/generate") -> PolicyHTTPError:
    """A final (4xx) answer as an error: :class:`ContextLengthError` for a 400 about the context, else
    PolicyHTTPError, in the server's own words."""
    cls = ContextLengthError if failure.is_context_length else PolicyHTTPError
    return cls(
        f"POST {path} answered {failure.status} (rid={rid}): {failure.message}", status=failure.status, body=body
    )


def classify_client_error(status: int, body: str, rid: str | None, path: str = "/generate") -> PolicyHTTPError:
    """A 4xx answer as the error :func:`post_json_with_retries` raises for it (``http_errors`` classifies it)."""
    failure = classify_status(status, body)
    if failure is None:
        raise ValueError(f"classify_client_error: HTTP {status} is not an error status")
    return _final_error(failure, body, rid, path)
