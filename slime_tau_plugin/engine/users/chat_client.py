"""Async client for an OpenAI-compatible ``/chat/completions`` endpoint (the LLM user simulator).

Our own client rather than litellm: importing τ² caps synchronous litellm calls at 10 in flight per
process, and a blocking call would hold a pool thread for the whole LLM latency. Here thousands of
user turns wait concurrently on the event loop. Connection errors, timeouts, 429 and 5xx are retried
with backoff (a chat completion has no side effects; a ``Retry-After`` is honoured; ``net/http_errors.py``
classifies the status); other 4xx and malformed answers are not. An endpoint guard (``endpoints.py``)
bounds the requests in flight and makes episodes wait out an outage; several URLs are replicas balanced by
``replicas.py``. Every failure surfaces as :class:`UserSimulatorError`, which ends the episode FAILED. Each
answer's token usage and latency are added to the episode's ``NetStats`` and (the customer's only) to the process's
token ledger, whose budget (``net/user_budget.py``) is checked before each request. Every try sent, failed or not, and
the time the episode awaits the endpoint go to the role's ``ChatMeter`` (the episode's ``CustomerCost``). A
deterministic request may be answered from the client's exact-request cache (``request_cache.py``,
``tau_user_cache_size``), and an episode's first request from its GRPO group's (``shared_opening.py``,
``tau_user_shared_opening``): both counted in ``NetStats``, neither a request sent (the wait for a shared opening is
the episode's wait all the same).
"""

from __future__ import annotations

import json
import time
from typing import Any

from slime_tau_plugin.engine.config.tau_config import LLMEndpoint
from slime_tau_plugin.engine.errors import EndpointDownError, UserSimulatorError
from slime_tau_plugin.engine.net.endpoints import EndpointGuard, EndpointRole
from slime_tau_plugin.engine.net.http_errors import classify_status
from slime_tau_plugin.engine.net.loop_http import LoopBoundHTTP, TransportError
from slime_tau_plugin.engine.net.replicas import ReplicaSet
from slime_tau_plugin.engine.net.retry import RetrySettings, retry_on_replicas
from slime_tau_plugin.engine.net.stats import ChatMeter, NetStats, current_stats
from slime_tau_plugin.engine.net.user_budget import UserTokenBudget, user_token_ledger
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.engine.users.request_cache import RequestCache, is_deterministic, request_key
from slime_tau_plugin.engine.users.shared_opening import OpeningRole, OpeningTable, opening_key


class _TransientError(UserSimulatorError):
    """A failure worth retrying (connection, timeout, 429, 5xx)."""

    retry_after: float | None = None


class ChatClient:
    """One role's pooled client over its replicas (one or several URLs); share it between episodes."""

    def __init__(
        self,
        endpoint: LLMEndpoint,
        *,
        what: str = "user simulator",
        guard: EndpointGuard | None = None,
        replicas: ReplicaSet | None = None,
        budget: UserTokenBudget | None = None,
        cache: RequestCache | None = None,
        role: EndpointRole = EndpointRole.USER,
    ) -> None:
        """``replicas``: the guards of ``endpoint.urls`` (``guard``: the one guard of a single URL; neither: no
        guard). ``budget``: the token limits every request is checked against (``net/user_budget.py``).
        ``cache``: answers of deterministic requests (None: every request is sent). ``role``: whose meter counts
        the requests (the customer's, or the review judge's, which spends no user budget)."""
        self.endpoint = endpoint
        self.what = what
        self.role = role
        self.retry = RetrySettings(attempts=endpoint.retries)
        self.replicas = replicas if replicas is not None else (ReplicaSet((guard,)) if guard is not None else None)
        self.budget = budget or UserTokenBudget()
        self.cache = cache
        self._http = {url: LoopBoundHTTP(url, timeout_s=endpoint.timeout_s) for url in endpoint.urls}

    async def aclose(self) -> None:
        for http in self._http.values():
            await http.aclose()

    def request_body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, seed: int | None = None
    ) -> dict[str, Any]:
        """The JSON body of one ``/chat/completions`` request, exactly as it is sent (and as the cache keys it)."""
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.endpoint.temperature,
        }
        if tools:
            body["tools"] = tools
        if seed is not None:
            body["seed"] = seed
        return body

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        seed: int | None = None,
        group: str | None = None,
    ) -> dict:
        """The first choice's ``message`` (``content`` and maybe ``tool_calls``); ``seed`` is sent as OpenAI's
        ``seed`` (vLLM and SGLang honour it per request), so a seeded episode's user is reproducible. ``group``:
        this is a GRPO group's opening request, asked once for the group (``shared_opening.py``).

        Raises:
            UserTokenBudgetError: the token budget is spent (checked before the request is sent).
            UserSimulatorError: after the retries, or at once for a non-retryable answer.
        """
        body = self.request_body(messages, tools, seed)
        stats = current_stats()
        started = time.perf_counter()
        try:
            if group is None:
                return await self._answer(body)
            key = opening_key(group, body, self.endpoint.urls)
            message, role = await shared_state().part(OpeningTable).first(key, lambda: self._answer(body))
            if stats is not None:
                stats.user_opening_asked += int(role is OpeningRole.ASKED)
                stats.user_opening_shared += int(role is OpeningRole.SHARED)
            return message
        finally:
            _meter(stats, self.role).wait_s += time.perf_counter() - started

    async def _answer(self, body: dict[str, Any]) -> dict:
        """The answer to ``body``: from the cache when it is deterministic and held there, else sent."""
        if self.cache is None or not is_deterministic(body):
            return await self._send(body)
        key = request_key(body, self.endpoint.urls)
        stats = current_stats()
        held = self.cache.get(key)
        if stats is not None:
            stats.user_cache_hits += int(held is not None)
            stats.user_cache_misses += int(held is None)
        if held is not None:
            return held
        message = await self._send(body)
        self.cache.put(key, message)
        return message

    async def _send(self, payload: dict[str, Any]) -> dict:
        """POST ``payload`` with retries over the replicas (see the module docstring)."""
        is_user = self.role is EndpointRole.USER
        ledger = user_token_ledger()
        if is_user:
            ledger.check(self.budget)
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"} if self.endpoint.api_key else None
        first = self.endpoint.urls[0]
        stats = current_stats()
        meter = _meter(stats, self.role)

        async def once(guard: EndpointGuard | None) -> dict:
            meter.requests += 1
            try:
                return await answer_of(guard)
            except Exception:
                meter.failed += 1
                raise

        async def answer_of(guard: EndpointGuard | None) -> dict:
            base = first if guard is None else guard.url
            url = f"{base}/chat/completions"
            t0 = time.perf_counter()
            try:
                answer = await self._http[base].post_json("/chat/completions", payload, headers)
            except TransportError as exc:
                raise _TransientError(f"{self.what}: {exc}") from exc
            finally:
                if stats is not None and is_user:
                    stats.user_latency_s += time.perf_counter() - t0
            text = answer.text
            failure = classify_status(answer.status, text, answer.retry_after)
            if failure is not None and failure.is_transient:
                error = _TransientError(f"{self.what}: POST {url} answered {failure.status}: {text[:200]}")
                error.retry_after = failure.retry_after
                raise error
            if failure is not None:
                raise UserSimulatorError(f"{self.what}: POST {url} answered {failure.status}: {text[:300]}")
            try:
                body = json.loads(text)
            except json.JSONDecodeError as exc:  # a body cut short: a chat completion is safe to ask again
                raise _TransientError(f"{self.what}: {url} answered a body that is not JSON: {text[:200]!r}") from exc
            try:
                message = body["choices"][0]["message"]
            except (KeyError, IndexError, TypeError) as exc:
                raise UserSimulatorError(f"{self.what}: {url} answered an unexpected body: {text[:200]!r}") from exc
            tokens = _count_usage(stats if is_user else None, meter, body.get("usage"))
            if is_user:
                ledger.spend(tokens)
            if not _has_words_or_calls(message):  # a bad reply, like a cut body: asked again
                raise _TransientError(f"{self.what}: {url} answered with an empty message")
            return message

        where = f"{self.what} {self.endpoint.base_url}"
        try:
            return await retry_on_replicas(once, self.retry, (_TransientError,), where, self.replicas)
        except _TransientError as exc:
            raise UserSimulatorError(f"{exc} (after {self.retry.attempts} tries)") from exc
        except EndpointDownError as exc:
            raise UserSimulatorError(str(exc)) from exc


def _has_words_or_calls(message: Any) -> bool:
    """Whether a chat message says something: text that is not blank, or tool calls."""
    return isinstance(message, dict) and bool(message.get("tool_calls") or str(message.get("content") or "").strip())


def _meter(stats: NetStats | None, role: EndpointRole) -> ChatMeter:
    """The episode's meter for ``role`` (a throwaway one outside an episode: a CLI pre-flight request)."""
    if stats is None:
        return ChatMeter()
    return stats.judge_chat if role is EndpointRole.JUDGE else stats.user_chat


def _count_usage(stats: NetStats | None, meter: ChatMeter, usage: Any) -> int:
    """Add an answer's OpenAI ``usage`` to the role's meter and (``stats``: the customer's) to the episode's
    user-simulator counts (what a team budgets); its tokens."""
    prompt = completion = 0
    if isinstance(usage, dict):
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    meter.prompt_tokens += prompt
    meter.completion_tokens += completion
    if stats is not None:
        stats.user_requests += 1
        stats.user_prompt_tokens += prompt
        stats.user_completion_tokens += completion
    return prompt + completion
