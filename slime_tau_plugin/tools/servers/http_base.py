"""The built-in servers' HTTP layer: an ``aiohttp.web`` app on its own event loop in a background thread.

``sglang_server.py`` (the SGLang-protocol policy), ``chat_user_server.py`` (the OpenAI-compatible user simulator
and judge) and tests' own servers subclass :class:`JSONServer`: they name their routes in ``get_routes`` and
``post_routes``, and callers get a blocking ``start``/``stop``/``url``, so tests and the CLI run a server
in-process beside their own event loop. ``tools/model/server.py`` serves its app through :class:`AppThread`.
Waits (``latency_s``, the ``slow`` fault) are ``asyncio.sleep``: they never hold up other requests. A handler bug
answers 500 instead of dropping the socket; a client that goes away mid-request (Ctrl-C of a rollout, a cancelled
episode) is logged at DEBUG, not as a traceback: it is the client's choice, not our fault.

Faults (``tools/faults/spec.py``): a server given a :class:`FaultInjector` draws one per request on its
:attr:`JSONServer.fault_routes` and carries the transport ones out here through ``fault_injection.py`` (refuse,
reset, 5xx, 429, slow, invalid JSON); ``GET /faults`` answers what it injected, by kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future
from typing import Any

from aiohttp import web

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.loop.blocking import prepare_for_threads
from slime_tau_plugin.tools.faults.spec import TRANSPORT_KINDS, FaultInjector, FaultKind, FaultRule
from slime_tau_plugin.tools.servers.fault_injection import drop_connection, early_reply, send_cut

logger = logging.getLogger(__name__)

Reply = tuple[int, Any]
"""HTTP status and JSON payload."""
Route = Callable[..., "Reply | Awaitable[Reply]"]
"""A route: ``()`` for GET, ``(body, headers)`` for POST; it returns a :data:`Reply` or a coroutine of one."""

REQUEST_LOG_LIMIT = 4096
"""Request bodies a built-in server keeps (tests read them): a /generate body is ~0.1 MB, so a long
``slime-tau serve`` must not keep every one (measured: 1.45 GB after 600 soak episodes before the bound)."""
MAX_BODY_BYTES = 256 * 1024 * 1024
"""aiohttp refuses bodies over 1 MiB by default; a /generate near a long context is bigger."""
BACKLOG = 1024
"""Pending connections the socket queues: many episodes connect at once (a short queue resets them)."""


class RequestLog(list):
    """The latest requests a server received, oldest first; ``total`` counts every one ever received.

    Bounded: past twice ``limit`` entries the oldest are dropped down to ``limit`` (amortised O(1)).
    """

    def __init__(self, limit: int = REQUEST_LOG_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        self.total = 0

    def append(self, item: Any) -> None:
        super().append(item)
        self.total += 1
        if len(self) > 2 * self.limit:
            del self[: len(self) - self.limit]


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer with ``Content-Type: application/json`` and no charset parameter, as the servers always sent."""
    body = json.dumps(payload).encode()
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


class _DaemonThreads(Executor):
    """A daemon thread per call, as the stdlib server had per connection: work that blocks for long (the oracle
    waiting for its task index, a test's slow reply) waits for no free worker and keeps no process alive."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting route
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True).start()
        return future


class AppThread:
    """Serves an ``aiohttp.web`` app from a daemon thread running its own event loop."""

    def __init__(self, name: str, host: str, port: int) -> None:
        self.name, self.host = name, host
        self.port = port
        """The port asked for; once started, the bound one (0 asks for a free port)."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._threads = _DaemonThreads()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, app: web.Application) -> None:
        """Bind ``host:port`` (``SO_REUSEADDR``: a restart reuses a port at once) and serve ``app`` until :meth:`stop`.

        Raises:
            ConfigError: the address cannot be bound (busy port, unknown host, no permission for a low port).
        """
        prepare_for_threads()
        bound = threading.Event()
        failed: list[Exception] = []

        def serve() -> None:
            loop = self.loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(self._bind(app))
            except Exception as exc:  # raised again in the caller's thread
                failed.append(exc)
            bound.set()
            if not failed:
                loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
        self._thread.start()
        bound.wait()
        if failed:
            exc = failed[0]
            if not isinstance(exc, OSError):
                raise exc
            reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else (exc.strerror or exc)
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port} ({reason}); choose another --port/--host "
                "or stop what is listening there"
            ) from exc

    def stop(self) -> None:
        """Stop listening and cut every open connection, as a process that dies would; in-flight handlers end."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        with contextlib.suppress(Exception):  # a loop already stopping
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a thread of its own, awaited on the server's loop: for work that may block."""
        return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the server's loop (at once when called there): loop objects are not thread-safe."""
        loop = self.loop
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread
            here = None
        if loop is None or here is loop:
            fn()
            return
        with contextlib.suppress(RuntimeError):  # closed: nothing waits any more
            loop.call_soon_threadsafe(fn)

    async def _bind(self, app: web.Application) -> None:
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=BACKLOG, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            raise
        self.port = self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        assert self._runner is not None
        for site in list(self._runner.sites):
            await site.stop()
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:  # every connection and handler: cut, as a dying process would
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await self._runner.cleanup()


class JSONServer:
    """Routes ``GET``/``POST`` paths to methods; subclasses fill :meth:`get_routes` and :meth:`post_routes`."""

    name = "json-server"
    fault_routes: frozenset[str] = frozenset()
    """POST paths where faults may strike: the work routes, never health, abort or control."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, faults: FaultInjector | None = None) -> None:
        self.faults = faults
        """Draws this server's faults (None: none)."""
        self.app_thread = AppThread(self.name, host, port)

    def get_routes(self) -> dict[str, Route]:
        return {}

    def post_routes(self) -> dict[str, Route]:
        return {}

    def fault_report(self) -> Reply:
        """``GET /faults``: the injector's rules, seed and counts by kind (empty without faults)."""
        if self.faults is None:
            return 200, {"target": None, "spec": "", "seed": None, "draws": 0, "injected": {}}
        return 200, self.faults.report()

    def transport_fault(self, path: str) -> FaultRule | None:
        """The HTTP-level fault to inject into this request, if any."""
        if self.faults is None or path not in self.fault_routes:
            return None
        return self.faults.draw(TRANSPORT_KINDS)

    @property
    def url(self) -> str:
        """The server's address; the bound port once started."""
        return self.app_thread.url

    def start(self):
        """Bind and serve from a background thread; returns ``self``.

        Raises:
            ConfigError: the address cannot be bound.
        """
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        gets = {**self.get_routes(), "/faults": self.fault_report}
        app.add_routes([web.get(path, self._get_handler(route)) for path, route in gets.items()])
        app.add_routes([web.post(path, self._post_handler(route)) for path, route in self.post_routes().items()])
        app.add_routes([web.route("*", "/{tail:.*}", self._no_route)])  # a JSON 404, for any method
        self.app_thread.start(app)
        return self

    def serve_forever(self) -> None:
        """Start and serve in the foreground until the process ends (a script whose process is the server)."""
        self.start()
        try:
            threading.Event().wait()
        finally:
            self.stop()

    def serve_until_interrupted(self) -> None:
        """Serve (already started) until Ctrl-C or SIGTERM's KeyboardInterrupt, then stop: a command's main loop."""
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop listening and cut every open connection, as a process that dies would."""
        self.app_thread.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _no_route(self, request: web.Request) -> web.StreamResponse:
        return json_response(404, {"error": {"message": f"no route {request.path}"}})

    def _get_handler(self, route: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._answer(request, route)

        return handle

    def _post_handler(self, route: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            fault = self.transport_fault(request.path)
            if fault is not None and fault.kind is FaultKind.REFUSE:
                drop_connection(request)  # before reading the body
                return web.Response()  # never sent: the connection is gone
            try:
                body = json.loads(await request.read() or b"{}")
            except ValueError:  # JSONDecodeError, UnicodeDecodeError
                return json_response(400, {"error": {"message": "body is not JSON"}})
            except ConnectionError as exc:  # the client went away mid-body
                logger.debug("%s: client went away during %s: %s", self.name, request.path, exc)
                return web.Response()
            return await self._answer(request, route, body, dict(request.headers), fault=fault)

        return handle

    async def _answer(
        self, request: web.Request, route: Route, *args: Any, fault: FaultRule | None = None
    ) -> web.StreamResponse:
        early = await early_reply(fault) if fault is not None else None
        if early is not None:
            return json_response(*early)
        try:
            reply = route(*args)
            status, payload = await reply if inspect.isawaitable(reply) else reply
        except Exception as exc:
            logger.exception("%s: handler for %s failed", self.name, request.path)
            status, payload = 500, {"error": {"message": f"{type(exc).__name__}: {exc}"}}
        logger.debug("%s: %s %s -> %d", self.name, request.method, request.path, status)
        if fault is not None and fault.kind in (FaultKind.RESET, FaultKind.INVALID_JSON):
            return await send_cut(request, status, payload, reset=fault.kind is FaultKind.RESET)
        return json_response(status, payload)
