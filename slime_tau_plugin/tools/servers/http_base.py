"""A tiny JSON-over-HTTP server in a background thread (stdlib only), for our CPU stand-in servers.

The SGLang-protocol policy server (``server.py``) and the OpenAI-compatible user-simulator server
(``user_server.py``) share it: real HTTP on 127.0.0.1, one thread per connection, so concurrent
episodes really wait concurrently. A handler bug answers 500 instead of dropping the socket; a client
that goes away mid-request (Ctrl-C of a rollout, a cancelled episode) is logged at DEBUG, not printed
as a traceback: it is the client's choice, not our fault.

Faults (``faults.py``): a server given a :class:`FaultInjector` draws one per request on its
:attr:`JSONServer.fault_routes` and carries the transport ones out here (``fault_injection.py``: refuse,
reset, 5xx, 429, slow, invalid JSON); ``GET /faults`` answers what it injected, by kind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slime_tau_plugin.engine.blocking import prepare_for_threads
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.faults.spec import TRANSPORT_KINDS, FaultInjector, FaultKind, FaultRule
from slime_tau_plugin.tools.servers.fault_injection import drop_connection, early_reply, send_cut

logger = logging.getLogger(__name__)

Reply = tuple[int, Any]
"""HTTP status and JSON payload."""

REQUEST_LOG_LIMIT = 4096
"""Request bodies a built-in server keeps (tests read them): a /generate body is ~0.1 MB, so a long
``slime-tau serve`` must not keep every one (measured: 1.45 GB after 600 soak episodes before the bound)."""


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


class _ThreadingServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    """The stdlib default (5) resets connections when many episodes connect at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections: set[socket.socket] = set()
        """Open client connections: ``stop`` cuts them as a dying server would (keep-alive outlives shutdown)."""
        self.connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self.connections_lock:
            open_now = list(self.connections)
        for conn in open_now:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that disconnected is normal (cancelled episodes); anything else keeps the stdlib report."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            logger.debug("client %s went away: %s", client_address, exc)
            return
        super().handle_error(request, client_address)


class JSONServer:
    """Routes ``GET``/``POST`` paths to methods; subclasses fill :meth:`get_routes` and :meth:`post_routes`."""

    name = "json-server"
    fault_routes: frozenset[str] = frozenset()
    """POST paths where faults may strike: the work routes, never health, abort or control."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, faults: FaultInjector | None = None) -> None:
        self.faults = faults
        """Draws this server's faults (None: none)."""
        try:
            self._httpd = _ThreadingServer((host, port), self._handler_class())
        except OSError as exc:  # busy port, unknown host, no permission for a low port
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port/--host "
                "or stop what is listening there"
            ) from exc
        self._thread: threading.Thread | None = None

    def get_routes(self) -> dict[str, Callable[[], Reply]]:
        return {}

    def post_routes(self) -> dict[str, Callable[[Any, dict[str, str]], Reply]]:
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
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        prepare_for_threads()
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.name, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

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
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.cut_connections()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                logger.debug(f"{server.name}: " + fmt, *args)

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _dispatch(self, route: Callable[..., Reply] | None, *args: Any, fault: FaultRule | None = None) -> None:
                if route is None:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                early = early_reply(fault) if fault is not None else None
                if early is not None:
                    self._send(*early)
                    return
                try:
                    status, payload = route(*args)
                except Exception as exc:
                    logger.exception("%s: handler for %s failed", server.name, self.path)
                    status, payload = 500, {"error": {"message": f"{type(exc).__name__}: {exc}"}}
                if fault is not None and fault.kind in (FaultKind.RESET, FaultKind.INVALID_JSON):
                    send_cut(self, status, payload, reset=fault.kind is FaultKind.RESET)
                    return
                self._send(status, payload)

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                path = self.path.split("?", 1)[0]  # routes ignore query strings
                self._dispatch({**server.get_routes(), "/faults": server.fault_report}.get(path))

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                fault = server.transport_fault(path)
                if fault is not None and fault.kind is FaultKind.REFUSE:
                    drop_connection(self)  # before reading the body
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except (json.JSONDecodeError, ValueError):
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                self._dispatch(server.post_routes().get(path), body, dict(self.headers), fault=fault)

        return Handler
