"""An ``httpx.AsyncClient`` bound to the running event loop.

slime runs every rollout on one long-lived loop thread, while tests and the CLI create their own loops;
an async client cannot be used across loops, so it is created lazily inside the running loop and
re-created if the loop changes. One client per endpoint keeps connections pooled across episodes.
"""

from __future__ import annotations

import asyncio
import functools
import ssl

import certifi
import httpx


@functools.lru_cache(maxsize=1)
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context per process: httpx builds a new one per client (~0.1 s of CPU on the loop)."""
    return ssl.create_default_context(cafile=certifi.where())


class LoopBoundHTTP:
    """Lazily creates (and re-creates per event loop) one pooled ``httpx.AsyncClient``."""

    def __init__(self, base_url: str, *, timeout: httpx.Timeout, max_connections: int = 2048) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ssl = shared_ssl_context()

    def client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            self._client = httpx.AsyncClient(
                base_url=self.base_url, timeout=self._timeout, limits=self._limits, verify=self._ssl
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and not self._client.is_closed:
            await self._client.aclose()
        self._client = None
