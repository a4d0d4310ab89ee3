"""JSON POSTs over one pooled ``aiohttp`` session per endpoint, bound to the running event loop.

slime runs every rollout on one long-lived loop thread, while tests and the CLI create their own
loops, and slime's fully-async rollout runs episodes on a worker thread's loop while evaluation runs on the
main one, at the same time; a client session cannot be used across loops, so each loop gets its own, created
lazily inside it; it is closed when its loop shuts down (``asyncio.run``'s end, through an
async generator the loop finalizes) or, for a loop still running in another thread, at interpreter exit,
so a script's log never ends with ``Unclosed client session``. aiohttp rather than httpx: httpcore's pool
scans every connection for every request, so with a few hundred episodes in flight the client itself ate most of the CPU
(measured: 9 of 14 CPU-seconds for 64 concurrent episodes). Callers get our two transport errors
and classify HTTP statuses themselves.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import ssl
import threading
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import certifi

from slime_tau_plugin.engine.shared import shared_state

try:  # ~10x faster for the long input_ids lists every /generate carries; optional
    import orjson

    def _dumps(payload: Any) -> bytes:
        return orjson.dumps(payload)
except ImportError:  # pragma: no cover - depends on the environment

    def _dumps(payload: Any) -> bytes:
        return json.dumps(payload).encode()


class _LiveClients(weakref.WeakSet):
    """Every client of the process (weakly held), for closing sessions when their loop ends or the process exits."""


def _live() -> weakref.WeakSet[LoopBoundHTTP]:
    return shared_state().part(_LiveClients)


@dataclass(frozen=True, slots=True)
class HTTPAnswer:
    """An HTTP answer, whatever its status."""

    status: int
    text: str
    retry_after: str | None = None
    """The ``Retry-After`` header as sent (429 and 503 carry one)."""


class TransportError(Exception):
    """The request did not get an HTTP answer (connection refused/reset, malformed response...)."""


class TransportTimeoutError(TransportError):
    """No complete answer within the timeout."""


@functools.lru_cache(maxsize=1)
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context per process (building one costs ~0.05 s of CPU on the loop)."""
    return ssl.create_default_context(cafile=certifi.where())


class LoopBoundHTTP:
    """``await post_json(path, payload) -> HTTPAnswer`` against ``base_url``."""

    def __init__(
        self, base_url: str, *, timeout_s: float, connect_timeout_s: float = 10.0, max_connections: int = 4096
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self._max_connections = max_connections
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSession] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        _live().add(self)

    async def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._per_loop.get(loop)
        if bound is None or bound.session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=shared_ssl_context())
            session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
            bound = _LoopSession(session, _close_at_loop_shutdown(session))
            with self._lock:
                self._per_loop[loop] = bound
            await anext(bound.closer)  # the loop now finalizes it in shutdown_asyncgens()
        return bound.session

    def sessions(self) -> list[tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession]]:
        """Every (loop, session) this client holds (one per loop that used it)."""
        with self._lock:
            return [(loop, bound.session) for loop, bound in self._per_loop.items()]

    async def post_json(self, path: str, payload: Any, headers: dict[str, str] | None = None) -> HTTPAnswer:
        """POST ``payload`` as JSON; the status, body and ``Retry-After`` of the answer, whatever the status.

        Raises:
            TransportTimeoutError: no answer within ``timeout_s``.
            TransportError: the connection failed or the answer was not HTTP.
        """
        url = self.base_url + path
        try:
            session = await self._client()
            async with session.post(url, data=_dumps(payload), headers=_json_headers(headers)) as resp:
                return HTTPAnswer(resp.status, await resp.text(), resp.headers.get("Retry-After"))
        except asyncio.TimeoutError as exc:
            raise TransportTimeoutError(f"POST {url} timed out after {self.timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"POST {url} failed: {exc!r}") from exc

    async def aclose(self) -> None:
        """Close this client's session on the running loop (sessions of other loops close with their loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._per_loop.pop(loop, None)
        if bound is not None and not bound.session.closed:
            await bound.session.close()


@dataclass(frozen=True, slots=True)
class _LoopSession:
    """One loop's session and the async generator that closes it when that loop shuts down."""

    session: aiohttp.ClientSession
    closer: AsyncIterator[None]


async def aclose_all() -> None:
    """Close every session bound to the running loop (call before a short-lived loop ends, e.g. the CLI's)."""
    for http in list(_live()):
        await http.aclose()


async def _close_at_loop_shutdown(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """Suspended once started; the loop's ``shutdown_asyncgens()`` resumes it into ``finally``."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


@atexit.register
def _close_on_running_loops() -> None:
    """At exit, close sessions whose loop still runs in another thread (slime's rollout loop)."""
    for http in list(_live()):
        for loop, session in http.sessions():
            if session.closed or loop.is_closed() or not loop.is_running():
                continue
            try:
                asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout=2)
            except Exception:  # noqa: BLE001 - best effort while the interpreter exits
                pass


def _json_headers(headers: dict[str, str] | None) -> dict[str, str]:
    return {"Content-Type": "application/json", **(headers or {})}
