"""``serve --model``: a real causal LM behind the SGLang and vLLM routes the built-in server speaks.

The wire formats are the built-in server's (``servers/sglang_server.py``, whose docstring draws them; its
validation and error bodies in ``completions_wire.py`` are reused here), with three differences:

- ``output_token_logprobs`` are the model's (``meta_info.logprob_semantics`` says which: SGLang's
  ``log_softmax(logits / temperature)`` before top-k/top-p/min-p), sent only with ``return_logprob`` as SGLang
  does; ``max_new_tokens`` defaults to SGLang's 128.
- ``finish_reason`` is SGLang's: ``{"type": "stop", "matched": id | "string"}``, ``{"type": "length",
  "length": N}``, or the abort object (partial output) when ``/abort_request`` hits the request while it runs
  or waits.
- Requests run one at a time, first come first served (one worker thread in front of the model);
  ``/v1/loads`` reports the running and waiting counts.

Its own routes rather than a model behind ``SGLangServer``: that server's fake-model seam returns ids only
(its log-probs are a fixed function of id and position) and checks aborts after generation, while a real
model needs its own log-probs and an abort checked between tokens. The loop, thread and binding are the
built-in servers' (``servers/http_base.AppThread``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.model.decoder import Decoded, ModelDecoder
from slime_tau_plugin.tools.model.sampling import LOGPROB_SEMANTICS, parse_sampling_params
from slime_tau_plugin.tools.servers.completions_wire import (
    ABORT_FINISH,
    completion_body,
    input_ids_error,
    model_info_body,
    openai_error,
    tokenize_reply,
    validation_error,
)
from slime_tau_plugin.tools.servers.http_base import MAX_BODY_BYTES, AppThread

_COMPLETIONS_TO_SGLANG = {"max_tokens": "max_new_tokens", "seed": "sampling_seed"}
_COMPLETIONS_KEPT = ("temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids", "ignore_eos")


@dataclass(eq=False, slots=True)
class _Request:
    rid: str
    prompt_tokens: int
    aborted: threading.Event = field(default_factory=threading.Event)


class ModelServer:
    """Serves a :class:`ModelDecoder` on ``host:port`` from a background thread (``start``/``stop``)."""

    def __init__(self, decoder: ModelDecoder, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.decoder = decoder
        self.model_id = decoder.model_dir
        self.weight_version = "default"
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")  # FIFO: fair queue
        self._requests: list[_Request] = []  # waiting and running, in arrival order
        self._running: _Request | None = None
        self._lock = threading.Lock()
        self._numbers = iter(range(1, 1 << 62))
        self._app_thread = AppThread("model-server", host, port)

    @property
    def url(self) -> str:
        return self._app_thread.url

    def start(self) -> None:
        """Bind and serve from a background thread.

        Raises:
            ConfigError: the address cannot be bound.
        """
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.add_routes(
            [
                web.post("/generate", self._generate_route),
                web.post("/v1/completions", self._completions_route),
                web.post("/abort_request", self._abort_route),
                web.get("/health", self._health),
                web.get("/health_generate", self._health),
                web.get("/v1/loads", self._loads),
                web.get("/model_info", self._model_info),
                web.get("/get_model_info", self._model_info),
                web.post("/tokenize", self._tokenize_route),
                web.get("/v1/models", self._models),
            ]
        )
        self._app_thread.start(app)

    def stop(self) -> None:
        with self._lock:
            for request in self._requests:
                request.aborted.set()
        self._app_thread.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # --- control routes --------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response(model_info_body(self.decoder.tokenizer, self.model_id, self.weight_version))

    async def _tokenize_route(self, request: web.Request) -> web.Response:
        return _reply(tokenize_reply(self.decoder.tokenizer, await _json(request), self.decoder.context_len))

    async def _models(self, request: web.Request) -> web.Response:
        card = {"id": self.model_id, "object": "model", "owned_by": "slime-tau-plugin"}
        return web.json_response({"object": "list", "data": [{**card, "max_model_len": self.decoder.context_len}]})

    async def _loads(self, request: web.Request) -> web.Response:
        with self._lock:
            running = 1 if self._running is not None else 0
            waiting = len(self._requests) - running
            used = self._running.prompt_tokens if self._running else 0
        load = {"timestamp": time.time(), "dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": waiting}
        return web.json_response(
            {
                "timestamp": datetime.now(timezone.utc).isoformat(),
                "version": "slime-tau-plugin",
                "accelerator": self.decoder.device,
                "num_accelerators": 1 if self.decoder.device != "cpu" else 0,
                "loads": [{**load, "num_used_tokens": used}],
            }
        )

    async def _abort_route(self, request: web.Request) -> web.Response:
        body = await _json(request)
        if not isinstance(body, dict):
            return _reply(validation_error("rid", "the body must be a JSON object"))
        rid, abort_all = str(body.get("rid") or ""), bool(body.get("abort_all"))
        with self._lock:
            for entry in self._requests:
                if abort_all or (rid and entry.rid.startswith(rid)):
                    entry.aborted.set()
        return web.json_response({})

    # --- generation ------------------------------------------------------------------------------

    async def _generate_route(self, request: web.Request) -> web.Response:
        body = await _json(request)
        if not isinstance(body, dict):
            return _reply(validation_error("input_ids", "the body must be a JSON object"))
        input_ids = body.get("input_ids")
        if input_ids is not None and (reason := input_ids_error(input_ids)):
            return _reply(validation_error("input_ids", reason))
        if not input_ids or min(input_ids) < 0 or max(input_ids) >= self.decoder.vocab_size:
            message = f"input_ids must be a non-empty list of token ids in [0, {self.decoder.vocab_size})"
            return web.json_response({"error": {"message": message}}, status=400)
        try:
            params = parse_sampling_params(body.get("sampling_params"))
        except ConfigError as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=400)
        total = len(input_ids) + params.max_new_tokens
        if total > self.decoder.context_len:
            message = (
                f"Requested token count exceeds the model's maximum context length of {self.decoder.context_len} "
                f"tokens. You requested a total of {total} tokens: {len(input_ids)} tokens from the input messages "
                f"and {params.max_new_tokens} tokens for the completion."
            )
            return web.json_response({"error": {"message": message}}, status=400)
        rid = str(body.get("rid") or f"req-{next(self._numbers)}")
        decoded = await self._run(rid, input_ids, params)
        meta: dict[str, Any] = {
            "id": rid,
            "finish_reason": decoded.finish,
            "prompt_tokens": len(input_ids),
            "completion_tokens": len(decoded.ids),
            "cached_tokens": 0,
            "weight_version": self.weight_version,
            "logprob_semantics": LOGPROB_SEMANTICS,
        }
        if body.get("return_logprob"):
            pairs = zip(decoded.log_probs, decoded.ids, strict=True)
            meta["output_token_logprobs"] = [[lp, t, None] for lp, t in pairs]
        return web.json_response({"text": decoded.text, "output_ids": list(decoded.ids), "meta_info": meta})

    async def _completions_route(self, request: web.Request) -> web.Response:
        body = await _json(request)
        if not isinstance(body, dict):
            return _reply(openai_error(400, "the body must be a JSON object"))
        prompt = body.get("prompt")
        if not prompt or input_ids_error(prompt) or min(prompt) < 0 or max(prompt) >= self.decoder.vocab_size:
            return _reply(
                openai_error(400, "this server takes one prompt of token ids (a list of ints >= 0)", "prompt")
            )
        if body.get("stream"):
            return _reply(openai_error(400, "stream=true is not supported by this server", "stream"))
        if body.get("model") not in (None, "", self.model_id):
            return _reply(openai_error(404, f"The model `{body['model']}` does not exist.", "model"))
        raw = {_COMPLETIONS_TO_SGLANG.get(k, k): v for k, v in body.items() if k in (*_COMPLETIONS_KEPT, "seed")}
        raw["max_new_tokens"] = int(body.get("max_tokens") or 16)
        try:
            params = parse_sampling_params(raw)
        except ConfigError as exc:
            return _reply(openai_error(400, str(exc)))
        if len(prompt) + params.max_new_tokens > self.decoder.context_len:
            return _reply(
                openai_error(
                    400,
                    f"'max_tokens' or 'max_completion_tokens' is too large: {params.max_new_tokens}. This model's "
                    f"maximum context length is {self.decoder.context_len} tokens and your request has "
                    f"{len(prompt)} input tokens.",
                    "max_tokens",
                )
            )
        rid = f"cmpl-{next(self._numbers)}"
        decoded = await self._run(rid, prompt, params)
        finish = decoded.finish["type"]
        payload = completion_body(
            body,
            prompt,
            list(decoded.ids),
            decoded.log_probs,
            finish,
            self.decoder.tokenizer.decode,
            rid=rid,
            model_id=self.model_id,
            weight_version=self.weight_version,
        )
        payload["metadata"]["logprob_semantics"] = LOGPROB_SEMANTICS
        return web.json_response(payload)

    async def _run(self, rid: str, input_ids: list[int], params: Any) -> Decoded:
        """Queue the request behind the ones already here and run it on the model thread."""
        entry = _Request(rid, len(input_ids))
        with self._lock:
            self._requests.append(entry)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._decode, entry, input_ids, params)
        except asyncio.CancelledError:  # the client hung up: stop spending the model on it
            entry.aborted.set()
            raise
        finally:
            with self._lock:
                self._requests.remove(entry)

    def _decode(self, entry: _Request, input_ids: list[int], params: Any) -> Decoded:
        if entry.aborted.is_set():  # aborted while waiting: SGLang answers with no output
            return Decoded((), (), dict(ABORT_FINISH), "")
        with self._lock:
            self._running = entry
        try:
            decoded = self.decoder.generate(input_ids, params, entry.aborted)
        finally:
            with self._lock:
                self._running = None
        if decoded.finish["type"] == "abort":
            return Decoded(decoded.ids, decoded.log_probs, dict(ABORT_FINISH), decoded.text)
        return decoded


async def _json(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        return None


def _reply(reply: tuple[int, Any]) -> web.Response:
    status, payload = reply
    return web.json_response(payload, status=status)
