"""The wire bodies both policy servers share (``servers/sglang_server.py``, ``model/server.py``).

SGLang's request validation (its 400 body) and abort ``finish_reason``; vLLM's ``/v1/completions`` answer
and error bodies. Only the rendering lives here; the routes, the models and the abort bookkeeping are the
servers'. The completion shape follows vLLM's ``CompletionResponse`` (``token_ids``/``prompt_token_ids``
only with ``return_token_ids``; ``logprobs.tokens`` as ``token_id:N`` only with
``return_tokens_as_token_ids``), plus SGLang's ``metadata.weight_version``.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

Reply = tuple[int, Any]

ABORT_FINISH = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
"""SGLang's ``FINISH_ABORT().to_json()``: what an aborted request reports."""


def input_ids_error(input_ids: Any) -> str | None:
    """Why SGLang's request validation would refuse ``input_ids`` (a flat list of int64), or None."""
    if not isinstance(input_ids, list):
        return f"must be list or null; got {type(input_ids).__name__}"
    if input_ids and isinstance(input_ids[0], list):
        return "batched input_ids (a list of lists) are not supported by this server"
    if input_ids and not isinstance(input_ids[0], int):
        return f"elements must be int; got {type(input_ids[0]).__name__}"
    try:
        array("q", input_ids)  # C-speed check of every element, as SGLang's validator does
    except (TypeError, OverflowError) as exc:
        return f"contains non-int64 element: {exc}"
    return None


def validation_error(field_name: str, reason: str) -> Reply:
    """SGLang's 400 body for a request that fails validation (its ``ErrorResponse``)."""
    error = f"{{'type': 'value_error', 'loc': ('body', {field_name!r}), 'msg': 'Value error, {reason}'}}"
    message = f"1 validation error:\n  {error}"
    return 400, {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": 400}


def openai_error(status: int, message: str, param: str | None = None) -> Reply:
    """vLLM's error body for ``/v1/*`` routes."""
    kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError")
    return status, {"error": {"message": message, "type": kind, "param": param, "code": status}}


def completion_body(
    request: dict[str, Any],
    prompt: list[int],
    ids: list[int],
    log_probs: Sequence[float],
    finish: str,
    decode: Callable[..., str],
    *,
    rid: str,
    model_id: str,
    weight_version: str,
) -> dict[str, Any]:
    """The 200 body for one generation; ``decode(ids, skip_special_tokens=...)`` renders text.

    As in vLLM, ``stop_reason`` is the last id when it is one of the request's ``stop_token_ids`` (null for
    EOS and other ends), and ``text`` drops the stop token unless ``include_stop_str_in_output``.
    """
    stopped = finish == "stop" and bool(ids)
    stop_reason = ids[-1] if stopped and ids[-1] in (request.get("stop_token_ids") or []) else None
    shown = ids[:-1] if stopped and not request.get("include_stop_str_in_output") else ids
    text = decode(shown, skip_special_tokens=bool(request.get("skip_special_tokens", True)))
    choice: dict[str, Any] = {
        "index": 0,
        "text": text,
        "finish_reason": finish,
        "stop_reason": stop_reason,
        "logprobs": None,
    }
    if request.get("logprobs") is not None:
        as_ids = bool(request.get("return_tokens_as_token_ids"))
        tokens = [f"token_id:{t}" if as_ids else decode([t]) for t in ids]
        choice["logprobs"] = {
            "text_offset": list(accumulate((len(t) for t in tokens[:-1]), initial=0)) if tokens else [],
            "token_logprobs": list(log_probs),
            "tokens": tokens,
            "top_logprobs": [{t: lp} for t, lp in zip(tokens, log_probs, strict=True)],
        }
    if request.get("return_token_ids"):
        choice["token_ids"], choice["prompt_token_ids"] = list(ids), list(prompt)
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model_id,
        "choices": [choice],
        "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)},
        "metadata": {"weight_version": weight_version},
    }


def tokenize_reply(tokenizer: Any, body: Any, max_model_len: int) -> Reply:
    """SGLang's (and vLLM's) ``POST /tokenize``: ``{"prompt": str, "add_special_tokens"?}`` ->
    ``{"tokens", "count", "max_model_len"}``; clients compare tokenizers with it (``cli/play/server_match.py``)."""
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if not isinstance(prompt, str):
        return validation_error("prompt", "this server tokenizes one string")
    tokens = list(tokenizer.encode(prompt, add_special_tokens=bool(body.get("add_special_tokens", True))))
    return 200, {"tokens": tokens, "count": len(tokens), "max_model_len": max_model_len}


def model_info_body(tokenizer: Any, model_path: str, weight_version: str, **extra: Any) -> dict[str, Any]:
    """SGLang's ``GET /model_info`` fields that say what is served (``tokenizer_path``: the tokenizer's own
    directory), plus ``extra`` (the oracle's ``tau_task_sets``)."""
    tokenizer_path = str(getattr(tokenizer, "name_or_path", "") or model_path)
    info = {"model_path": model_path, "tokenizer_path": tokenizer_path, "is_generation": True}
    return info | {"weight_version": weight_version} | extra


def weight_version_reply(server: Any, body: Any) -> Reply:
    """SGLang's ``POST /update_weight_version {"new_version": str}`` -> ``{"success", "message", "new_version"}``:
    what ``/generate`` reports as ``meta_info.weight_version`` from now on (CPU checks stand in for slime's weight
    push with it; requests in flight are not aborted here)."""
    version = body.get("new_version") if isinstance(body, dict) else None
    if version is None:
        return validation_error("new_version", "a weight version is required")
    server.weight_version = str(version)
    return 200, {"success": True, "message": f"weight version updated to {version}", "new_version": str(version)}
