"""Async client for SGLang's native ``/generate``: token ids in, token ids and log-probs out.

Wire format (request, then response)::

    POST /generate {"input_ids": [...], "sampling_params": {"max_new_tokens": N, ...},
                    "return_logprob": true, "rid": "..."}
    200 {"text": "...", "output_ids": [...],
         "meta_info": {"finish_reason": {"type": "stop"|"length"|"abort", "matched": ...},
                       "output_token_logprobs": [[logprob, token_id, text|null], ...], ...}}
    400 {"error": {"message": "..."}}      # e.g. prompt + max_new_tokens exceed the context

This is the only module that talks HTTP to the policy and the only one that reads ``meta_info``.
Connection failures, timeouts and 5xx are retried with backoff (generation is stateless, so a
retry is safe); 4xx is never retried. An engine abort is a ``finish_reason``, not an exception.
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import (
    ContextLengthError,
    PolicyConnectionError,
    PolicyHTTPError,
    PolicyProtocolError,
)
from .loop_http import LoopBoundHTTP, TransportError
from .retry import RetrySettings, retry_async

logger = logging.getLogger(__name__)


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
    """Sampled ids, stop token included (SGLang keeps it in ``output_ids``)."""
    log_probs: tuple[float, ...]
    """One log-prob per output id."""
    finish_reason: FinishReason
    meta_info: dict[str, Any]
    """SGLang's ``meta_info`` as returned (weight version, cached tokens, ...)."""


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


class _TransientHTTPError(PolicyHTTPError):
    """A 5xx answer: retried, then surfaced as PolicyHTTPError."""


class SGLangPolicy:
    """A connection-reusing client for one SGLang server or router (see ``loop_http.py``)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        retry: RetrySettings | None = None,
        max_connections: int = 4096,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetrySettings()
        self._http = LoopBoundHTTP(
            self.base_url, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, max_connections=max_connections
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult:
        """POST ``/generate`` and return the typed result.

        Raises:
            ContextLengthError: HTTP 400 about the context length (not retried).
            PolicyHTTPError: any other non-2xx after retries (5xx) or at once (4xx).
            PolicyConnectionError: transport failures or timeouts after retries.
            PolicyProtocolError: a 2xx body that is not SGLang's shape.
        """
        payload: dict[str, Any] = {
            "input_ids": list(input_ids),
            "sampling_params": sampling_params,
            "return_logprob": True,
        }
        if rid is not None:
            payload["rid"] = rid

        async def once() -> dict[str, Any]:
            try:
                status, text = await self._http.post_json("/generate", payload, headers)
            except TransportError as exc:
                raise PolicyConnectionError(f"{exc} (rid={rid})") from exc
            if status >= 500:
                raise _TransientHTTPError(f"POST /generate answered {status} (rid={rid})", status=status, body=text)
            if status >= 400:
                raise _classify_client_error(status, text, rid)
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise PolicyProtocolError(f"/generate answered non-JSON (rid={rid}): {text[:200]!r}") from exc

        try:
            body = await retry_async(
                once, self.retry, (PolicyConnectionError, _TransientHTTPError), f"rid={rid} /generate"
            )
        except _TransientHTTPError as exc:
            raise PolicyHTTPError(str(exc), status=exc.status, body=exc.body) from exc
        return parse_generate_response(body, rid)

    async def abort(self, rid: str) -> None:
        """Ask the server to stop a request; best effort."""
        try:
            await self._http.post_json("/abort_request", {"rid": rid})
        except TransportError as exc:
            logger.warning("abort of rid=%s failed: %r", rid, exc)


def _classify_client_error(status: int, body: str, rid: str | None) -> PolicyHTTPError:
    try:
        message = json.loads(body)["error"]["message"]
    except (json.JSONDecodeError, KeyError, TypeError):
        message = body[:500]
    lowered = str(message).lower()
    mentions_tokens = "token" in lowered and ("exceed" in lowered or "longer than" in lowered)
    is_context = status == 400 and ("context length" in lowered or "context window" in lowered or mentions_tokens)
    cls = ContextLengthError if is_context else PolicyHTTPError
    return cls(f"POST /generate answered {status} (rid={rid}): {message}", status=status, body=body)


def parse_generate_response(body: Any, rid: str | None = None) -> GenerateResult:
    """Turn SGLang's JSON into a :class:`GenerateResult` (the only reader of ``meta_info``).

    Raises:
        PolicyProtocolError: the body lacks ``meta_info``, log-probs, or ids and log-probs disagree.
    """
    if isinstance(body, list):  # batch form with one prompt
        body = body[0] if len(body) == 1 else body
    if not isinstance(body, dict) or not isinstance(body.get("meta_info"), dict):
        raise PolicyProtocolError(f"/generate body has no meta_info (rid={rid}): {str(body)[:200]!r}")
    meta = body["meta_info"]
    finish = meta.get("finish_reason") or {}
    try:
        finish_type = FinishReason(finish.get("type") if isinstance(finish, dict) else str(finish))
    except ValueError:
        raise PolicyProtocolError(f"unknown finish_reason {finish!r} (rid={rid})") from None
    entries = meta.get("output_token_logprobs")
    if entries is None:
        if finish_type is FinishReason.ABORT:
            entries = []
        else:
            raise PolicyProtocolError(f"meta_info has no output_token_logprobs; send return_logprob=true (rid={rid})")
    log_probs = tuple(float(e[0]) for e in entries)
    logprob_ids = tuple(int(e[1]) for e in entries)
    output_ids = tuple(int(t) for t in body.get("output_ids", logprob_ids))
    if output_ids != logprob_ids:
        raise PolicyProtocolError(
            f"output_ids ({len(output_ids)}) and output_token_logprobs ({len(logprob_ids)}) disagree (rid={rid})"
        )
    return GenerateResult(output_ids, log_probs, finish_type, meta)
