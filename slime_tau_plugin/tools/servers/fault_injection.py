"""How the built-in servers carry out an injected fault (which one, and when: ``faults/spec.py``'s injector).

- The HTTP exchange (``http_base.py``, every server, on aiohttp): :func:`drop_connection` (``refuse``),
  :func:`early_reply` (``http_5xx``, ``http_429`` with ``Retry-After``; ``slow`` waits here), :func:`send_cut`
  (``reset``: half the body then the connection drops; ``invalid_json``: a 200 whose JSON stops half-way).
- What the policy generates (``sglang_server.py``, both protocols): :func:`model_fault` rewrites the fake
  model's output (``abort``, ``empty_output``, ``special_tokens``, tool-call faults; raises
  :class:`ServerFaultError` for ``context_length``), and :func:`after_render` breaks the rendered body
  (``logprob_mismatch``).
- What the user or judge answers (``chat_user_server.py``): :func:`chat_fault`.

The fake models themselves (``fake_models.py``) know nothing of faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import struct
from typing import Any

from aiohttp import web

from slime_tau_plugin.tools.faults.spec import FaultKind, FaultRule
from slime_tau_plugin.tools.servers.tool_call_formats import ToolCallFormat, get_format

INJECTED_TOOL = "injected_unknown_tool"
"""The tool name ``unknown_tool`` (and ``multi_call`` on a turn without a call) writes: no domain has it."""
_SPECIAL_TOKENS = ("<|im_end|>", "<|endoftext|>")


class ServerFaultError(Exception):
    """Raised by a policy to make the server answer with an HTTP error (fault injection)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def context_length_message(context_len: int, input_len: int, max_new: int) -> str:
    """SGLang's 400 message when input + ``max_new_tokens`` exceed the context (clients classify on its words)."""
    return (
        f"Requested token count exceeds the model's maximum context length of {context_len} tokens. You requested "
        f"a total of {input_len + max_new} tokens: {input_len} tokens from the input messages and {max_new} tokens "
        "for the completion."
    )


# --- the HTTP exchange ---------------------------------------------------------------------------


def drop_connection(request: web.BaseRequest) -> None:
    """Close the connection unanswered: a FIN, then a reset (``SO_LINGER`` 0); the client sees it drop."""
    transport = request.transport
    if transport is None:  # already gone
        return
    with contextlib.suppress(OSError, AttributeError):
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.write_eof()
    transport.close()


async def early_reply(rule: FaultRule) -> tuple[int, Any, dict[str, str]] | None:
    """The answer that replaces the route's (status, body, extra headers), or None to run the route.

    ``slow`` waits here (without holding up other requests) and then lets the route answer.
    """
    if rule.kind is FaultKind.SLOW:
        await asyncio.sleep(rule.param or 0.0)
        return None
    if rule.kind is FaultKind.HTTP_5XX:
        status = int(rule.param or 500)
        return status, {"error": {"message": f"injected fault {rule.name}", "code": status}}, {}
    if rule.kind is FaultKind.HTTP_429:
        seconds = rule.param or 0.0
        retry_after = str(int(seconds)) if seconds == int(seconds) else f"{seconds:g}"
        body = {"error": {"message": "injected fault http_429: rate limited", "code": 429}}
        return 429, body, {"Retry-After": retry_after}
    return None


async def send_cut(request: web.BaseRequest, status: int, payload: Any, *, reset: bool) -> web.StreamResponse:
    """Half of the JSON body: announced in full then dropped (``reset``), or a short, complete 200 whose
    JSON is invalid (``invalid_json``)."""
    data = json.dumps(payload).encode()
    half = data[: max(1, len(data) // 2)]
    if not reset:
        return web.Response(status=200, body=half, content_type="application/json")
    response = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
    response.content_length = len(data)
    await response.prepare(request)
    await response.write(half)
    drop_connection(request)
    return response  # aiohttp's end of it meets the closed connection and lets it go


# --- the policy's output -------------------------------------------------------------------------


def model_fault(rule: FaultRule, out: Any, policy: Any, context_len: int, input_len: int) -> Any:
    """``out`` (a ``ModelOutput``) with ``rule`` applied; ``policy`` is the fake model (its tokenizer and
    template write the tool-call faults). ``abort_all`` is the server's to carry out: it owns the requests.

    Raises:
        ServerFaultError: ``context_length`` (HTTP 400 with SGLang's message).
    """
    kind, ids = rule.kind, list(out.ids)
    if kind is FaultKind.CONTEXT_LENGTH:
        raise ServerFaultError(400, context_length_message(context_len, input_len, context_len - input_len + 1))
    if kind is FaultKind.ABORT:
        return dataclasses.replace(out, abort=True)
    if kind is FaultKind.EMPTY_OUTPUT:
        return dataclasses.replace(out, ids=())
    if kind is FaultKind.SPECIAL_TOKENS:
        mid = len(ids) // 2
        return dataclasses.replace(out, ids=tuple(ids[:mid] + _special_ids(policy) + ids[mid:]))
    if kind in (FaultKind.MALFORMED_CALL, FaultKind.UNKNOWN_TOOL, FaultKind.MULTI_CALL):
        return dataclasses.replace(out, ids=tuple(_tool_call_turn(kind, ids, policy)))
    return out


def after_render(rule: FaultRule | None, payload: dict[str, Any]) -> dict[str, Any]:
    """The rendered 200 body with ``logprob_mismatch`` applied (one log-prob fewer than output ids)."""
    if rule is None or rule.kind is not FaultKind.LOGPROB_MISMATCH:
        return payload
    meta = payload.get("meta_info")
    if isinstance(meta, dict) and meta.get("output_token_logprobs"):  # SGLang /generate
        meta["output_token_logprobs"] = meta["output_token_logprobs"][:-1]
    for choice in payload.get("choices") or ():  # /v1/completions
        logprobs = choice.get("logprobs") or {}
        for key in ("token_logprobs", "top_logprobs"):
            if logprobs.get(key):
                logprobs[key] = logprobs[key][:-1]
    return payload


def _special_ids(policy: Any) -> list[int]:
    tokenizer = policy.tokenizer
    ids = [tokenizer.convert_tokens_to_ids(token) for token in _SPECIAL_TOKENS]
    unk = getattr(tokenizer, "unk_token_id", None)
    found = [i for i in ids if isinstance(i, int) and i != unk]
    return found or list(policy.template.eot_ids)


def _tool_call_turn(kind: FaultKind, ids: list[int], policy: Any) -> list[int]:
    """The turn rewritten as a broken call, a call to an unknown tool, or its own call twice (in the fake
    model's tool-call format, Qwen's without one)."""
    fmt = getattr(policy, "format", None)
    fmt = fmt if isinstance(fmt, ToolCallFormat) else get_format("qwen25")
    eot = list(policy.template.eot_ids)
    body = ids[: -len(eot)] if eot and ids[-len(eot) :] == eot else ids
    if kind is FaultKind.MALFORMED_CALL:
        text = fmt.write(INJECTED_TOOL, {"key": "value"}, 0).replace('"value"', "")  # {"key": } does not parse
    elif kind is FaultKind.UNKNOWN_TOOL:
        text = fmt.write(INJECTED_TOOL, {}, 0)
    else:
        original = policy.tokenizer.decode(body, skip_special_tokens=False)
        at = original.find(fmt.start)
        twice = original + "\n" + original[at:] if at >= 0 else None
        text = twice or fmt.write(INJECTED_TOOL, {}, 0) + "\n" + fmt.write(INJECTED_TOOL, {}, 1)
    return list(policy.template.encode(text)) + eot


# --- the user's (or judge's) answer --------------------------------------------------------------


def chat_fault(rule: FaultRule | None, message: dict[str, Any]) -> dict[str, Any]:
    """The chat ``message`` with ``empty_reply`` (no content) or ``tool_calls_only`` (a call, no content) applied."""
    if rule is None:
        return message
    if rule.kind is FaultKind.EMPTY_REPLY:
        return {"role": "assistant", "content": ""}
    if rule.kind is FaultKind.TOOL_CALLS_ONLY:
        call = {"id": "injected-call", "type": "function", "function": {"name": INJECTED_TOOL, "arguments": "{}"}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return message
