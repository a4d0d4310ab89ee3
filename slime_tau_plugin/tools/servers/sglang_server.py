"""An SGLang-protocol policy server for CPU runs and tests (real HTTP on 127.0.0.1, no GPU).

It plays both slime's router and one SGLang engine behind it, speaking the subset of their APIs that
the plugin and slime's rollout loop use (slime ends each rollout step with ``GET /workers``, then
``POST /abort_request {"abort_all": true}`` to each worker and ``GET /v1/loads`` until idle)::

    POST /generate        {"input_ids", "sampling_params": {"max_new_tokens", ...}, "return_logprob", "rid"}
                          -> {"text", "output_ids", "meta_info": {"id", "finish_reason": {"type", "matched"},
                              "prompt_tokens", "completion_tokens", "cached_tokens", "weight_version",
                              "output_token_logprobs": [[logprob, id, null], ...]}}
                          -> finish_reason {"type": "abort", "message": "Aborted", "status_code": null,
                             "err_type": null} when aborted while in flight (partial output)
                          -> 400 {"error": {"message"}} when input + max_new_tokens exceed the context
                          -> 400 {"object": "error", "message", "type": "Bad Request", "param": null,
                             "code": 400} when input_ids is not a list of ints (SGLang's validation error)
    POST /abort_request   {"rid"} | {"abort_all": true} -> 200 {}
                          aborts in-flight requests (all, or those whose rid starts with ``rid``, as
                          SGLang matches); a request that has not arrived yet is not affected
    GET  /v1/loads        -> {"timestamp", "version", "accelerator", "num_accelerators",
                              "loads": [{"timestamp", "dp_rank", "num_running_reqs", "num_waiting_reqs",
                                         "num_used_tokens"}]}   (query string such as ?include=core ignored)
    GET|POST /flush_cache -> 200 {"message"} when idle, 400 {"error": {"message"}} while requests run
    POST /update_weight_version {"new_version"} -> {"success", "message", "new_version"} (SGLang's; no abort)
    GET  /workers         (sglang-router) -> {"workers": [{"id", "url", "model_id", "priority", "cost",
                              "worker_type", "is_healthy", "load", "connection_mode"}], "total",
                              "stats": {"total_workers", "healthy_workers", "total_models", "total_load",
                                        "by_type": {"regular", "prefill", "decode"}}}   (this server only)
    GET  /health, /health_generate
    GET  /model_info, /get_model_info -> {"model_path", "tokenizer_path", "is_generation", "weight_version",
                              "tau_task_sets": [[benchmark, domain, split], ...] | null (ours: the oracle's tasks)}
    POST /tokenize        {"prompt": str, "add_special_tokens"?} -> {"tokens", "count", "max_model_len"}
    POST /v1/completions  (vLLM's) {"prompt": [ids], "max_tokens", "model"?, "logprobs"?, "return_token_ids"?,
                              "return_tokens_as_token_ids"?, "stop_token_ids"?, "include_stop_str_in_output"?}
                          -> {"id", "object": "text_completion", "created", "model", "choices": [{"index": 0,
                              "text", "finish_reason": "stop"|"length"|"abort", "stop_reason": id|null,
                              "token_ids"?, "prompt_token_ids"?, "logprobs": {"tokens": ["token_id:N"|text],
                              "token_logprobs", "top_logprobs", "text_offset"}|null}], "usage": {"prompt_tokens",
                              "completion_tokens", "total_tokens"}, "metadata": {"weight_version"} (SGLang's)}
                          -> 400 {"error": {"message", "type": "BadRequestError", "param", "code": 400}} for a
                             prompt that is not token ids, stream=true, or prompt + max_tokens over the context
                             ("... maximum context length is N tokens ..."); 404 for another model name
    GET  /v1/models       -> {"object": "list", "data": [{"id", "object": "model", "owned_by", "max_model_len"}]}

Both protocols share the fake model and the in-flight bookkeeping (same ids, log-probs and aborts). As in
vLLM, ``stop_reason`` is the last id when it is one of ``stop_token_ids``, and ``text`` drops the stop
token unless ``include_stop_str_in_output`` while ``token_ids`` and the log-probs keep it.

What the "model" says comes from a :class:`FakeModel` (``fake_models.py``): token ids in, token ids
out. Log-probs are a deterministic function of (token id, position), so tests can check that the
client stored them in the right places. The fake model runs in a worker thread (the oracle waits there
for its task index); ``latency_s`` is waited on the server's event loop on the request's own event, so an
abort ends the wait at once and other requests go on meanwhile. A ``faults`` injector (``faults/spec.py``)
breaks requests on purpose: the HTTP exchange in ``http_base.py``, the output here through
``fault_injection.py``; ``GET /faults`` counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from slime_tau_plugin.tools.faults.spec import MODEL_KINDS, FaultInjector, FaultKind, FaultRule
from slime_tau_plugin.tools.servers.completions_wire import (
    ABORT_FINISH,
    completion_body,
    input_ids_error,
    model_info_body,
    openai_error,
    tokenize_reply,
    validation_error,
    weight_version_reply,
)
from slime_tau_plugin.tools.servers.fault_injection import (
    ServerFaultError,
    after_render,
    context_length_message,
    model_fault,
)
from slime_tau_plugin.tools.servers.http_base import JSONServer, Reply, RequestLog

__all__ = ["ABORT_FINISH", "FakeModel", "ModelOutput", "SGLangServer", "ServerFaultError", "fake_logprob"]


@dataclass(frozen=True, slots=True)
class ModelOutput:
    """What a server policy generated for one request."""

    ids: tuple[int, ...]
    """Token ids, end-of-turn included when the turn is complete."""
    abort: bool = False
    """Finish with ``abort`` (as SGLang does when a request is aborted)."""
    start: int = 0
    """Where ``ids`` begin within their turn: a turn cut by an abort and continued later goes on from its
    ids (log-probs depend on the position within the turn, so a continued turn matches an uncut one)."""


class FakeModel(Protocol):
    def generate(self, input_ids: Sequence[int], sampling_params: dict[str, Any]) -> ModelOutput: ...


@dataclass(frozen=True, slots=True)
class _Generated:
    """What one request produced, after the limit and abort were applied (both protocols render it)."""

    rid: str
    ids: list[int]
    finish: dict[str, Any]
    """SGLang's ``finish_reason`` object."""
    fault: FaultRule | None = None
    """The output fault injected into it, if any (the renderers apply ``logprob_mismatch``)."""
    start: int = 0
    """``ModelOutput.start``."""

    @property
    def log_probs(self) -> list[float]:
        return [fake_logprob(t, self.start + i) for i, t in enumerate(self.ids)]


@dataclass(eq=False, slots=True)
class _InFlight:
    """One request inside :meth:`SGLangServer._generate` (either protocol)."""

    rid: str
    prompt_tokens: int
    aborted: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by ``/abort_request`` (on the server's loop); the latency wait returns as soon as it is set."""


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic, position-dependent log-prob in (-1, 0): misplaced log-probs are detectable."""
    return -(((token_id * 31 + position * 17) % 997) + 1) / 1000.0


class SGLangServer(JSONServer):
    """Runs a :class:`FakeModel` behind SGLang's (and sglang-router's) HTTP protocol in a background thread."""

    name = "policy-server"
    fault_routes = frozenset({"/generate", "/v1/completions"})

    def __init__(
        self,
        policy: FakeModel,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        context_len: int = 32768,
        latency_s: float = 0.0,
        weight_version: str = "default",
        faults: FaultInjector | None = None,
        task_sets: Sequence[tuple[str, str, str]] | None = None,
    ) -> None:
        self.policy = policy
        self.task_sets = [list(task_set) for task_set in task_sets] if task_sets is not None else None
        """The (benchmark, domain, split) an oracle knows, reported by ``/model_info`` (None: any task)."""
        self.context_len = context_len
        self.latency_s = latency_s
        self.weight_version = weight_version
        self.requests = RequestLog()
        """The latest /generate bodies received, in order (tests read it to check TITO)."""
        self.completion_requests = RequestLog()
        """The latest /v1/completions bodies received, in order."""
        self.request_headers = RequestLog()
        """The HTTP headers of each /generate request, aligned with ``requests``."""
        self.flushes = 0
        """How many ``/flush_cache`` calls succeeded."""
        self.worker_id = str(uuid.uuid4())
        self._running: set[_InFlight] = set()
        self._lock = threading.Lock()
        super().__init__(host, port, faults)

    @property
    def worker_url(self) -> str:
        """The URL ``/workers`` lists: ``url``, with a wildcard bind address replaced by the host name."""
        host, port = self.app_thread.host, self.app_thread.port
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        return f"http://{host}:{port}"

    @property
    def num_running(self) -> int:
        """Requests currently inside :meth:`handle_generate`."""
        with self._lock:
            return len(self._running)

    def get_routes(self) -> dict[str, Callable[[], Reply]]:
        healthy = lambda: (200, {"status": "ok"})  # noqa: E731
        return {
            "/health": healthy,
            "/health_generate": healthy,
            "/model_info": self.model_info,
            "/get_model_info": self.model_info,
            "/v1/loads": self.loads,
            "/workers": self.workers,
            "/flush_cache": self.flush_cache,
            "/v1/models": self.models,
        }

    def post_routes(self) -> dict[str, Callable[[Any, dict[str, str]], Reply]]:
        return {
            "/generate": self.handle_generate,
            "/v1/completions": self.handle_completions,
            "/abort_request": self._abort_route,
            "/tokenize": self.tokenize,
            "/flush_cache": lambda body, headers: self.flush_cache(),
            "/update_weight_version": lambda body, headers: weight_version_reply(self, body),
        }

    @property
    def model_id(self) -> str:
        return type(self.policy).__name__

    # --- router and engine control ---------------------------------------------------------------

    def workers(self) -> Reply:
        load = self.num_running
        worker = {
            "id": self.worker_id,
            "url": self.worker_url,
            "model_id": self.model_id,
            "priority": 50,
            "cost": 1.0,
            "worker_type": "regular",
            "is_healthy": True,
            "load": load,
            "connection_mode": "http",
        }
        by_type = {"regular": 1, "prefill": 0, "decode": 0}
        stats = {"total_workers": 1, "healthy_workers": 1, "total_models": 1, "total_load": load, "by_type": by_type}
        return 200, {"workers": [worker], "total": 1, "stats": stats}

    def loads(self) -> Reply:
        with self._lock:
            running, used = len(self._running), sum(r.prompt_tokens for r in self._running)
        load = {"timestamp": time.time(), "dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": 0}
        load["num_used_tokens"] = used
        return 200, {
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "version": "slime-tau-plugin",
            "accelerator": None,
            "num_accelerators": 0,
            "loads": [load],
        }

    def model_info(self) -> Reply:
        tokenizer = getattr(self.policy, "tokenizer", None)
        return 200, model_info_body(tokenizer, self.model_id, self.weight_version, tau_task_sets=self.task_sets)

    def tokenize(self, body: Any, headers: dict[str, str]) -> Reply:
        if (tokenizer := getattr(self.policy, "tokenizer", None)) is None:
            return 404, {"error": {"message": f"{self.model_id} has no tokenizer"}}
        return tokenize_reply(tokenizer, body, self.context_len)

    def models(self) -> Reply:
        card = {"id": self.model_id, "object": "model", "owned_by": "slime-tau-plugin"}
        card["max_model_len"] = self.context_len
        return 200, {"object": "list", "data": [card]}

    def flush_cache(self) -> Reply:
        running = self.num_running
        if running:
            return 400, {"error": {"message": f"Cache not flushed: {running} requests are running."}}
        with self._lock:
            self.flushes += 1
        return 200, {"message": "Cache flushed."}

    def _abort_route(self, body: Any, headers: dict[str, str]) -> Reply:
        if not isinstance(body, dict):
            return validation_error("rid", "the body must be a JSON object")
        self.abort(str(body.get("rid") or ""), abort_all=bool(body.get("abort_all")))
        return 200, {}

    def abort(self, rid: str = "", *, abort_all: bool = False) -> int:
        """Abort in-flight requests: all, or those whose rid starts with ``rid``; returns how many.

        An empty ``rid`` without ``abort_all`` aborts nothing (SGLang ignores it too).
        """
        if not abort_all and not rid:
            return 0
        with self._lock:
            hits = [r for r in self._running if abort_all or r.rid.startswith(rid)]
        for request in hits:
            self.app_thread.call_soon(request.aborted.set)
        return len(hits)

    # --- generation ------------------------------------------------------------------------------

    async def handle_generate(self, body: Any, headers: dict[str, str] | None = None) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(dict(headers or {}))
            number = self.requests.total
        if not isinstance(body, dict):
            return validation_error("input_ids", "the body must be a JSON object")
        input_ids = body.get("input_ids")
        if input_ids is not None and (reason := input_ids_error(input_ids)):
            return validation_error("input_ids", reason)
        if not input_ids:
            return 400, {"error": {"message": "input_ids must be a non-empty list of token ids"}}
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens")
        if max_new is not None and len(input_ids) + int(max_new) > self.context_len:
            return 400, {"error": {"message": context_length_message(self.context_len, len(input_ids), int(max_new))}}
        generated = await self._generate(str(body.get("rid") or f"req-{number}"), input_ids, params, max_new)
        if not isinstance(generated, _Generated):
            return generated
        ids = generated.ids
        meta = {
            "id": generated.rid,
            "finish_reason": generated.finish,
            "prompt_tokens": len(input_ids),
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "weight_version": self.weight_version,
            "output_token_logprobs": [[lp, t, None] for lp, t in zip(generated.log_probs, ids, strict=True)],
        }
        return 200, after_render(generated.fault, {"text": self.decode(ids), "output_ids": ids, "meta_info": meta})

    async def handle_completions(self, body: Any, headers: dict[str, str] | None = None) -> Reply:
        """vLLM's ``/v1/completions`` for a token-id prompt, played by the same fake model."""
        with self._lock:
            self.completion_requests.append(body)
            number = self.completion_requests.total
        if not isinstance(body, dict):
            return openai_error(400, "the body must be a JSON object")
        prompt = body.get("prompt")
        if not prompt or input_ids_error(prompt) or min(prompt) < 0:
            return openai_error(400, "this server takes one prompt of token ids (a list of ints >= 0)", "prompt")
        if body.get("stream"):
            return openai_error(400, "stream=true is not supported by this server", "stream")
        if body.get("model") not in (None, "", self.model_id):
            return openai_error(404, f"The model `{body['model']}` does not exist.", "model")
        max_tokens = int(body.get("max_tokens") or 16)
        if len(prompt) + max_tokens > self.context_len:
            return openai_error(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
                f"length is {self.context_len} tokens and your request has {len(prompt)} input tokens "
                f"({max_tokens} > {self.context_len} - {len(prompt)}).",
                "max_tokens",
            )
        params = {"max_new_tokens": max_tokens, **{k: body[k] for k in ("temperature", "top_p", "top_k") if k in body}}
        generated = await self._generate(f"cmpl-{number}", prompt, params, max_tokens)
        if not isinstance(generated, _Generated):
            return generated
        finish, rid = generated.finish["type"], generated.rid
        rendered = completion_body(
            body, prompt, generated.ids, generated.log_probs, finish, self.decode, rid=rid, model_id=self.model_id,
            weight_version=self.weight_version,
        )  # fmt: skip
        return 200, after_render(generated.fault, rendered)

    async def _generate(
        self, rid: str, input_ids: list[int], params: dict[str, Any], max_new: Any
    ) -> _Generated | Reply:
        """Run the fake model as one in-flight (abortable) request; apply the token limit and an abort."""
        request = _InFlight(rid, len(input_ids))
        fault = self.faults.draw(MODEL_KINDS) if self.faults is not None else None
        with self._lock:
            self._running.add(request)
        try:
            try:
                out = await self.app_thread.run_blocking(self.policy.generate, input_ids, params)
                if fault is not None:
                    out = model_fault(fault, out, self.policy, self.context_len, len(input_ids))
            except ServerFaultError as exc:
                return exc.status, {"error": {"message": str(exc)}}
            if self.latency_s:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(request.aborted.wait(), self.latency_s)
            if fault is not None and fault.kind is FaultKind.ABORT_ALL:  # once its own work is done, like slime's
                self.abort(abort_all=True)
        finally:
            with self._lock:
                self._running.discard(request)
        ids = list(out.ids)
        limit = self.context_len - len(input_ids) if max_new is None else int(max_new)
        finish: dict[str, Any]
        if out.abort or request.aborted.is_set():
            finish = dict(ABORT_FINISH)
            ids = ids[: min(len(ids), limit) // 2]
        elif len(ids) > limit:
            ids, finish = ids[:limit], {"type": "length", "length": limit}
        else:
            finish = {"type": "stop", "matched": ids[-1] if ids else None}
        return _Generated(rid, ids, finish, fault, out.start)

    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        tokenizer = getattr(self.policy, "tokenizer", None)
        return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens) if tokenizer is not None else ""
