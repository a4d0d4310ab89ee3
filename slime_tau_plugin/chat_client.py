"""Async client for an OpenAI-compatible ``/chat/completions`` endpoint (the LLM user simulator).

Our own client rather than litellm: importing τ² caps synchronous litellm calls at 10 in flight per
process, and a blocking call would hold a pool thread for the whole LLM latency. Here thousands of
user turns wait concurrently on the event loop. Connection errors, timeouts, 429 and 5xx are retried
with backoff (a chat completion has no side effects); other 4xx and malformed answers are not.
Every failure surfaces as :class:`UserSimulatorError`, which ends the episode FAILED.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from .config import LLMEndpoint
from .errors import UserSimulatorError
from .loop_http import LoopBoundHTTP
from .policy import RetryPolicy, retry_async


class _TransientError(UserSimulatorError):
    """A failure worth retrying (connection, timeout, 429, 5xx)."""


class ChatClient:
    """One endpoint's pooled client; share it between episodes."""

    def __init__(self, endpoint: LLMEndpoint, *, what: str = "user simulator") -> None:
        self.endpoint = endpoint
        self.what = what
        self.retry = RetryPolicy(attempts=endpoint.retries)
        self._http = LoopBoundHTTP(endpoint.base_url, timeout=httpx.Timeout(endpoint.timeout_s, connect=10.0))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict:
        """The first choice's ``message`` (``content`` and maybe ``tool_calls``).

        Raises:
            UserSimulatorError: after the retries, or at once for a non-retryable answer.
        """
        payload: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.endpoint.temperature,
        }
        if tools:
            payload["tools"] = tools
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"} if self.endpoint.api_key else None
        url = f"{self.endpoint.base_url}/chat/completions"

        async def once() -> dict:
            try:
                resp = await self._http.client().post("/chat/completions", json=payload, headers=headers)
            except httpx.TimeoutException as exc:
                raise _TransientError(f"{self.what}: POST {url} timed out after {self.endpoint.timeout_s}s") from exc
            except httpx.TransportError as exc:
                raise _TransientError(f"{self.what}: POST {url} failed: {exc!r}") from exc
            if resp.status_code == 429 or resp.status_code >= 500:
                raise _TransientError(f"{self.what}: POST {url} answered {resp.status_code}: {resp.text[:200]}")
            if resp.status_code >= 400:
                raise UserSimulatorError(f"{self.what}: POST {url} answered {resp.status_code}: {resp.text[:300]}")
            try:
                return resp.json()["choices"][0]["message"]
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
                unexpected = f"{self.what}: {url} answered an unexpected body: {resp.text[:200]!r}"
                raise UserSimulatorError(unexpected) from exc

        try:
            return await retry_async(once, self.retry, (_TransientError,), f"{self.what} {url}")
        except _TransientError as exc:
            raise UserSimulatorError(f"{exc} (after {self.retry.attempts} tries)") from exc
