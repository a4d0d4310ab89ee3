"""An SGLang-protocol policy server for CPU runs and tests (real HTTP on 127.0.0.1, no GPU).

Speaks the subset of SGLang's native API the plugin uses::

    POST /generate        {"input_ids", "sampling_params": {"max_new_tokens", ...}, "return_logprob", "rid"}
                          -> {"text", "output_ids", "meta_info": {"id", "finish_reason": {"type", "matched"},
                              "prompt_tokens", "completion_tokens", "cached_tokens", "weight_version",
                              "output_token_logprobs": [[logprob, id, null], ...]}}
                          -> 400 {"error": {"message"}} when input + max_new_tokens exceed the context
    POST /abort_request   {"rid"}   (an in-flight request with that rid finishes with "abort")
    GET  /health, /health_generate, /get_model_info

What the "model" says comes from a :class:`FakeModel` (``server_policies.py``): token ids in, token
ids out. Log-probs are a deterministic function of (token id, position), so tests can check that the
client stored them in the right places.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .http_base import JSONServer, Reply


class ServerFaultError(Exception):
    """Raised by a policy to make the server answer with an HTTP error (fault injection)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ModelOutput:
    """What a server policy generated for one request."""

    ids: tuple[int, ...]
    """Token ids, end-of-turn included when the turn is complete."""
    abort: bool = False
    """Finish with ``abort`` (as SGLang does when a request is aborted)."""


class FakeModel(Protocol):
    def generate(self, input_ids: Sequence[int], sampling_params: dict[str, Any]) -> ModelOutput: ...


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic, position-dependent log-prob in (-1, 0): misplaced log-probs are detectable."""
    return -(((token_id * 31 + position * 17) % 997) + 1) / 1000.0


class SGLangServer(JSONServer):
    """Runs a :class:`FakeModel` behind SGLang's HTTP protocol in a background thread."""

    name = "policy-server"

    def __init__(
        self,
        policy: FakeModel,
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
        super().__init__(host, port)

    def get_routes(self) -> dict[str, Callable[[], Reply]]:
        healthy = lambda: (200, {"status": "ok"})  # noqa: E731
        return {
            "/health": healthy,
            "/health_generate": healthy,
            "/get_model_info": lambda: (200, {"model_path": type(self.policy).__name__, "is_generation": True}),
        }

    def post_routes(self) -> dict[str, Callable[[Any, dict[str, str]], Reply]]:
        return {"/generate": self.handle_generate, "/abort_request": self._abort_route}

    def _abort_route(self, body: Any, headers: dict[str, str]) -> Reply:
        self.abort(str(body.get("rid", "")))
        return 200, {}

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
