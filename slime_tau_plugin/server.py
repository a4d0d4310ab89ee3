"""An SGLang-protocol policy server for CPU runs and tests (real HTTP on 127.0.0.1, no GPU).

Speaks the subset of SGLang's native API the plugin uses::

    POST /generate        {"input_ids", "sampling_params": {"max_new_tokens", ...}, "return_logprob", "rid"}
                          -> {"text", "output_ids", "meta_info": {"id", "finish_reason": {"type", "matched"},
                              "prompt_tokens", "completion_tokens", "cached_tokens", "weight_version",
                              "output_token_logprobs": [[logprob, id, null], ...]}}
                          -> 400 {"error": {"message"}} when input + max_new_tokens exceed the context
    POST /abort_request   {"rid"}   (an in-flight request with that rid finishes with "abort")
    GET  /health, /health_generate, /get_model_info

What the "model" says comes from a :class:`ServerPolicy` (``server_policies.py``): token ids in, token
ids out. Log-probs are a deterministic function of (token id, position), so tests can check that the
client stored them in the right places.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class ServerFaultError(Exception):
    """Raised by a policy to make the server answer with an HTTP error (fault injection)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class PolicyOutput:
    """What a server policy generated for one request."""

    ids: tuple[int, ...]
    """Token ids, end-of-turn included when the turn is complete."""
    abort: bool = False
    """Finish with ``abort`` (as SGLang does when a request is aborted)."""


class ServerPolicy(Protocol):
    def generate(self, input_ids: Sequence[int], sampling_params: dict[str, Any]) -> PolicyOutput: ...


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic, position-dependent log-prob in (-1, 0): misplaced log-probs are detectable."""
    return -(((token_id * 31 + position * 17) % 997) + 1) / 1000.0


class PolicyServer:
    """Runs a :class:`ServerPolicy` behind SGLang's HTTP protocol in a background thread."""

    def __init__(
        self,
        policy: ServerPolicy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        context_len: int = 32768,
        latency_s: float = 0.0,
        weight_version: str = "default",
    ) -> None:
        self.policy = policy
        self.context_len = context_len
        self.latency_s = latency_s
        self.weight_version = weight_version
        self.requests: list[dict[str, Any]] = []
        """Every /generate body received, in order (tests read it to check TITO)."""
        self.request_headers: list[dict[str, str]] = []
        """The HTTP headers of each /generate request, aligned with ``requests``."""
        self._aborted: set[str] = set()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> PolicyServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="policy-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- protocol ------------------------------------------------------------------------------

    def handle_generate(
        self, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(dict(headers or {}))
        input_ids = body.get("input_ids")
        if not isinstance(input_ids, list) or not input_ids:
            return 400, {"error": {"message": "input_ids must be a non-empty list of token ids"}}
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens")
        if max_new is not None and len(input_ids) + int(max_new) > self.context_len:
            return 400, {
                "error": {
                    "message": f"Requested token count exceeds the model's maximum context length of "
                    f"{self.context_len} tokens. You requested a total of {len(input_ids) + int(max_new)} tokens: "
                    f"{len(input_ids)} tokens from the input messages and {max_new} tokens for the completion."
                }
            }
        rid = str(body.get("rid") or f"req-{len(self.requests)}")
        try:
            out = self.policy.generate(input_ids, params)
        except ServerFaultError as fault:
            return fault.status, {"error": {"message": str(fault)}}
        if self.latency_s:
            time.sleep(self.latency_s)
        ids = list(out.ids)
        limit = self.context_len - len(input_ids) if max_new is None else int(max_new)
        finish: dict[str, Any]
        with self._lock:
            aborted = rid in self._aborted
        if out.abort or aborted:
            finish = {"type": "abort", "message": "Abort request"}
            ids = ids[: min(len(ids), limit) // 2]
        elif len(ids) > limit:
            ids, finish = ids[:limit], {"type": "length", "length": limit}
        else:
            finish = {"type": "stop", "matched": ids[-1] if ids else None}
        meta = {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": len(input_ids),
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "weight_version": self.weight_version,
            "output_token_logprobs": [[fake_logprob(t, i), t, None] for i, t in enumerate(ids)],
        }
        text = self.decode(ids)
        return 200, {"text": text, "output_ids": ids, "meta_info": meta}

    def decode(self, ids: list[int]) -> str:
        tokenizer = getattr(self.policy, "tokenizer", None)
        return tokenizer.decode(ids, skip_special_tokens=False) if tokenizer is not None else ""

    def abort(self, rid: str) -> None:
        with self._lock:
            self._aborted.add(rid)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                logger.debug("policy-server: " + fmt, *args)

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                if self.path in ("/health", "/health_generate"):
                    self._send(200, {"status": "ok"})
                elif self.path == "/get_model_info":
                    self._send(200, {"model_path": type(server.policy).__name__, "is_generation": True})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                try:
                    body = self._body()
                except (json.JSONDecodeError, ValueError):
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                if self.path == "/generate":
                    try:
                        status, payload = server.handle_generate(body, dict(self.headers))
                    except Exception as exc:  # a policy bug must show up as a 500, not a dead socket
                        logger.exception("policy failed")
                        status, payload = 500, {"error": {"message": f"{type(exc).__name__}: {exc}"}}
                    self._send(status, payload)
                elif self.path == "/abort_request":
                    server.abort(str(body.get("rid", "")))
                    self._send(200, {})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

        return Handler
