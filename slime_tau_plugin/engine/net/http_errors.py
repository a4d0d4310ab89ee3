"""The one reading of an HTTP error answer: retried or not, the server's ``Retry-After``, its message.

Every HTTP client of the engine (the policy's ``/generate`` and ``/v1/completions``, the LLM user's
``/chat/completions``) sends requests without side effects, so they share one rule: 429 and 5xx are
transient (retried, after the server's ``Retry-After``); any other 4xx is final; a 400 about the context
length is its own outcome (the episode ends ``context_length``, not FAILED). Each client turns an
:class:`HTTPFailure` into its own error type; none reads a status itself. Imports nothing of the package.
"""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass

__all__ = ["HTTPFailure", "classify_status", "parse_retry_after"]


@dataclass(frozen=True, slots=True)
class HTTPFailure:
    """A non-2xx answer, classified."""

    status: int
    is_transient: bool
    """429 or 5xx: worth another try (the request has no side effects)."""
    retry_after: float | None
    """Seconds the server asked us to wait (``Retry-After``), None when it did not say."""
    message: str
    """The server's own words: ``{"error": {"message"}}`` (SGLang, vLLM, OpenAI), else the body's start."""
    is_context_length: bool
    """A 400 because prompt + ``max_new_tokens`` do not fit the model's context."""


def classify_status(status: int, body: str, retry_after: str | None = None) -> HTTPFailure | None:
    """The failure an answer with ``status`` and ``body`` is; None for a status below 400 (not a failure)."""
    if status < 400:
        return None
    message = _server_message(body)
    lowered = message.lower()
    mentions_tokens = "token" in lowered and ("exceed" in lowered or "longer than" in lowered)
    is_context = status == 400 and ("context length" in lowered or "context window" in lowered or mentions_tokens)
    is_transient = status == 429 or status >= 500
    return HTTPFailure(
        status=status,
        is_transient=is_transient,
        retry_after=parse_retry_after(retry_after) if is_transient else None,
        message=message,
        is_context_length=is_context,
    )


def parse_retry_after(header: str | None) -> float | None:
    """``Retry-After`` in seconds: its delta-seconds form, or an HTTP date; None when absent or unreadable."""
    if not header:
        return None
    header = header.strip()
    if header.isdigit():
        return float(header)
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(body: str) -> str:
    """``{"error": {"message"}}``'s message, else the raw body (whose text still carries the message in
    SGLang's flat ``{"object": "error", "message"}`` form)."""
    try:
        return str(json.loads(body)["error"]["message"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return body[:500]
