"""A tiny JSON-over-HTTP server in a background thread (stdlib only), for our CPU stand-in servers.

The SGLang-protocol policy server (``server.py``) and the OpenAI-compatible user-simulator server
(``user_server.py``) share it: real HTTP on 127.0.0.1, one thread per connection, so concurrent
episodes really wait concurrently. A handler bug answers 500 instead of dropping the socket; a client
that goes away mid-request (Ctrl-C of a rollout, a cancelled episode) is logged at DEBUG, not printed
as a traceback: it is the client's choice, not our fault.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..blocking import prepare_for_threads
from ..errors import ConfigError

logger = logging.getLogger(__name__)

Reply = tuple[int, Any]
"""HTTP status and JSON payload."""


class _ThreadingServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    """The stdlib default (5) resets connections when many episodes connect at once."""

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

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
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

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

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

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _dispatch(self, route: Callable[..., Reply] | None, *args: Any) -> None:
                if route is None:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    status, payload = route(*args)
                except Exception as exc:
                    logger.exception("%s: handler for %s failed", server.name, self.path)
                    status, payload = 500, {"error": {"message": f"{type(exc).__name__}: {exc}"}}
                self._send(status, payload)

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                self._dispatch(server.get_routes().get(self.path.split("?", 1)[0]))  # routes ignore query strings

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except (json.JSONDecodeError, ValueError):
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                self._dispatch(server.post_routes().get(self.path.split("?", 1)[0]), body, dict(self.headers))

        return Handler
