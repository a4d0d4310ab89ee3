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

from .config import LLMEndpoint
from .errors import UserSimulatorError
from .loop_http import LoopBoundHTTP, TransportError
from .retry import RetrySettings, retry_async


class _TransientError(UserSimulatorError):
    """A failure worth retrying (connection, timeout, 429, 5xx)."""


class ChatClient:
    """One endpoint's pooled client; share it between episodes."""

    def __init__(self, endpoint: LLMEndpoint, *, what: str = "user simulator") -> None:
        self.endpoint = endpoint
        self.what = what
        self.retry = RetrySettings(attempts=endpoint.retries)
        self._http = LoopBoundHTTP(endpoint.base_url, timeout_s=endpoint.timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *, seed: int | None = None
    ) -> dict:
        """The first choice's ``message`` (``content`` and maybe ``tool_calls``); ``seed`` is sent as OpenAI's
        ``seed`` (vLLM and SGLang honour it per request), so a seeded episode's user is reproducible.

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
        if seed is not None:
            payload["seed"] = seed
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"} if self.endpoint.api_key else None
        url = f"{self.endpoint.base_url}/chat/completions"

        async def once() -> dict:
            try:
                status, text = await self._http.post_json("/chat/completions", payload, headers)
            except TransportError as exc:
                raise _TransientError(f"{self.what}: {exc}") from exc
            if status == 429 or status >= 500:
                raise _TransientError(f"{self.what}: POST {url} answered {status}: {text[:200]}")
            if status >= 400:
                raise UserSimulatorError(f"{self.what}: POST {url} answered {status}: {text[:300]}")
            try:
                return json.loads(text)["choices"][0]["message"]
            except (json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
                raise UserSimulatorError(f"{self.what}: {url} answered an unexpected body: {text[:200]!r}") from exc

        try:
            return await retry_async(once, self.retry, (_TransientError,), f"{self.what} {url}")
        except _TransientError as exc:
            raise UserSimulatorError(f"{exc} (after {self.retry.attempts} tries)") from exc
