"""JSON POSTs over one pooled ``aiohttp`` session per endpoint, bound to the running event loop.

slime runs every rollout on one long-lived loop thread, while tests and the CLI create their own
loops; a client session cannot be used across loops, so it is created lazily inside the running loop
and re-created if the loop changes. aiohttp rather than httpx: httpcore's pool scans every connection
for every request, so with a few hundred episodes in flight the client itself ate most of the CPU
(measured: 9 of 14 CPU-seconds for 64 concurrent episodes). Callers get our two transport errors
and classify HTTP statuses themselves.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import weakref
from typing import Any

import aiohttp
import certifi

try:  # ~10x faster for the long input_ids lists every /generate carries; optional
    import orjson

    def _dumps(payload: Any) -> bytes:
        return orjson.dumps(payload)
except ImportError:  # pragma: no cover - depends on the environment

    def _dumps(payload: Any) -> bytes:
        return json.dumps(payload).encode()


_live: weakref.WeakSet[LoopBoundHTTP] = weakref.WeakSet()


class TransportError(Exception):
    """The request did not get an HTTP answer (connection refused/reset, malformed response...)."""


class TransportTimeoutError(TransportError):
    """No complete answer within the timeout."""


@functools.lru_cache(maxsize=1)
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context per process (building one costs ~0.05 s of CPU on the loop)."""
    return ssl.create_default_context(cafile=certifi.where())


class LoopBoundHTTP:
    """``await post_json(path, payload) -> (status, body text)`` against ``base_url``."""

    def __init__(
        self, base_url: str, *, timeout_s: float, connect_timeout_s: float = 10.0, max_connections: int = 4096
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        _live.add(self)

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=shared_ssl_context())
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
            self._loop = loop
        return self._session

    async def post_json(self, path: str, payload: Any, headers: dict[str, str] | None = None) -> tuple[int, str]:
        """POST ``payload`` as JSON; the status and body of the answer, whatever the status.

        Raises:
            TransportTimeoutError: no answer within ``timeout_s``.
            TransportError: the connection failed or the answer was not HTTP.
        """
        url = self.base_url + path
        try:
            async with self._client().post(url, data=_dumps(payload), headers=_json_headers(headers)) as resp:
                return resp.status, await resp.text()
        except asyncio.TimeoutError as exc:
            raise TransportTimeoutError(f"POST {url} timed out after {self.timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise TransportError(f"POST {url} failed: {exc!r}") from exc

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


async def aclose_all() -> None:
    """Close every session bound to the running loop (call before a short-lived loop ends, e.g. the CLI's)."""
    loop = asyncio.get_running_loop()
    for http in list(_live):
        if http._loop is loop:
            await http.aclose()


def _json_headers(headers: dict[str, str] | None) -> dict[str, str]:
    return {"Content-Type": "application/json", **(headers or {})}
