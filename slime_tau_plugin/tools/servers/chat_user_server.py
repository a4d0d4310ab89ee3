"""An OpenAI-compatible chat server that plays τ's simulated customer without an LLM (CPU, tests).

``POST /v1/chat/completions`` answers like a user-simulator LLM would, so the real ``LLMUser`` code path
(HTTP, retries, role flipping, user tools, stop markers) runs end to end on a CPU box:

- first turn: the task scenario from τ's user system prompt (τ²'s ``<scenario>...</scenario>``, v1's
  ``Instruction: ...``);
- when the agent asks it to act (``fake_models.ASK_USER`` + tool name + JSON arguments) and the user
  has tools: a ``tool_calls`` answer, then a short report of the tool's result;
- otherwise ``max_replies`` polite confirmations, then ``###STOP###``.

Latency and failures can be injected (``latency_s``, ``fail_first``, ``fail_status``, ``empty``) to test
timeouts, retries and FAILED episodes, or drawn by a ``faults`` injector (``faults/spec.py``, target ``user`` or
``judge``): refused and reset connections, 5xx, 429 with ``Retry-After``, slow and invalid-JSON answers
(``http_base.py``), an empty answer or one with only a tool call (here), and a customer that answers
well-formed and wrong (``customer_faults.py``: what the review must catch; ``faults_set="paraphrased"``: the
shapes of ``customer_faults_paraphrased.py``; ``"freeform"``: ``customer_faults_freeform.py``; ``"roleplay"`` and
``"slips"``: ``customer_faults_roleplay.py``, ``customer_faults_slips.py``, all logged at ``GET /faults/log``).
``GET /faults`` counts them;
``GET /requests`` counts the chat requests it was sent (``{"total": n}``, failed ones included).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from slime_tau_plugin.engine.review.checks import GO_AHEAD
from slime_tau_plugin.tools.faults.spec import CHAT_KINDS, FaultInjector
from slime_tau_plugin.tools.servers.customer_faults import customer_fault
from slime_tau_plugin.tools.servers.customer_faults_freeform import freeform_fault
from slime_tau_plugin.tools.servers.customer_faults_paraphrased import paraphrased_fault
from slime_tau_plugin.tools.servers.customer_faults_roleplay import roleplay_fault
from slime_tau_plugin.tools.servers.customer_faults_slips import slips_fault
from slime_tau_plugin.tools.servers.fake_models import ASK_USER
from slime_tau_plugin.tools.servers.fault_injection import chat_fault
from slime_tau_plugin.tools.servers.http_base import JSONServer, Reply, RequestLog

CONTINUE = GO_AHEAD
"""The scripted customer's "go ahead" answer, the same as ``tau_user=scripted``'s (the review knows it)."""
_SCENARIO = (
    re.compile(r"<scenario>\s*(.*?)\s*</scenario>", re.DOTALL),  # τ²'s user prompt
    re.compile(r"\nInstruction: (.*?)\n\nRules:", re.DOTALL),  # τ-bench v1's
)
FAULT_SETS = ("templated", "paraphrased", "freeform", "roleplay", "slips")
"""Which customer-fault generator ``faults`` drives: one template per kind, the paraphrases, the freeform set
written blind to the review's checks (``customer_faults_freeform.py``), or the roleplay set, a customer that slips
into the agent's role, written blind for the final held-out measurement (``customer_faults_roleplay.py``), or the
slips set, only agent acts as a drifting LLM customer writes them, decided per conversation, written blind for the
held-out measurement of that one check (``customer_faults_slips.py``)."""
_REQUEST = re.compile(re.escape(ASK_USER) + r"\s+(\w+)\s+(\{.*\})", re.DOTALL)


def scenario_of(messages: list[dict[str, Any]]) -> str:
    """The task scenario in τ's user system prompt (τ²'s ``<scenario>``, v1's ``Instruction:``), or ""."""
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    found = next((m for m in (p.search(system) for p in _SCENARIO) if m), None)
    return found.group(1) if found else ""


def scripted_user_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, max_replies: int) -> dict:
    """The ``message`` a scripted customer sends next, given the conversation from its side."""
    own_turns = sum(1 for m in messages if m.get("role") == "assistant" and m.get("content"))
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"role": "assistant", "content": f"Done. My phone shows: {str(last.get('content'))[:300]}"}
    if own_turns == 0:
        return {"role": "assistant", "content": scenario_of(messages) or "Hi, I need help with my account."}
    request = _REQUEST.search(str(last.get("content") or ""))
    if request and tools:
        call = {"name": request.group(1), "arguments": request.group(2)}
        call_id = f"user-call-{len(messages)}"
        tool_call = {"id": call_id, "type": "function", "function": call}
        return {"role": "assistant", "content": None, "tool_calls": [tool_call]}
    if own_turns <= max_replies:
        return {"role": "assistant", "content": CONTINUE}
    return {"role": "assistant", "content": "Thank you, that is all. ###STOP###"}


class ChatUserServer(JSONServer):
    """Serves :func:`scripted_user_reply` (or any ``reply`` function) as ``/v1/chat/completions``.

    The scripted reply is quick and runs on the server's loop; a ``reply`` passed in may block (tests' slow
    users), so it runs in a worker thread. ``latency_s`` is slept on the loop: other requests go on.
    """

    name = "user-server"
    fault_routes = frozenset({"/v1/chat/completions"})

    def __init__(
        self,
        *,
        reply: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], dict] | None = None,
        max_replies: int = 0,
        latency_s: float = 0.0,
        fail_first: int = 0,
        fail_status: int = 500,
        empty: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: FaultInjector | None = None,
        faults_set: str = "templated",
    ) -> None:
        self.reply = reply or (lambda messages, tools: scripted_user_reply(messages, tools, max_replies))
        self._reply_may_block = reply is not None
        self.latency_s = latency_s
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.empty = empty
        self.requests = RequestLog()
        """Every request body, in arrival order."""
        self.request_headers = RequestLog()
        """Each request's HTTP headers, aligned with ``requests``."""
        self._lock = threading.Lock()
        if faults_set not in FAULT_SETS:
            raise ValueError(f"faults_set must be one of {', '.join(FAULT_SETS)}, got {faults_set!r}")
        self.faults_set = faults_set
        self.customer_log: list[dict[str, Any]] = []
        """The paraphrased or freeform faults injected, in order (``GET /faults/log``; empty for the templated set)."""
        super().__init__(host, port, faults)

    @property
    def base_url(self) -> str:
        """What to pass as ``tau_user_base_url``."""
        return f"{self.url}/v1"

    def get_routes(self) -> dict[str, Callable[[], Reply]]:
        return {
            "/v1/models": lambda: (200, {"data": [{"id": "scripted-user", "object": "model"}]}),
            "/requests": lambda: (200, {"total": self.requests.total}),  # what it served (benchmarks/user_cost.py)
            "/faults/log": lambda: (200, {"set": self.faults_set, "injected": list(self.customer_log)}),
        }

    def post_routes(self) -> dict[str, Callable[[Any, dict[str, str]], Reply]]:
        return {"/v1/chat/completions": self.complete}

    async def complete(self, body: Any, headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            failing = self.requests.total <= self.fail_first
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if failing:
            return self.fail_status, {"error": {"message": f"injected failure {self.fail_status}"}}
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, {"error": {"message": "messages must be a non-empty list"}}
        if self.empty:
            message = {"role": "assistant", "content": ""}
        elif self._reply_may_block:
            message = await self.app_thread.run_blocking(self.reply, messages, body.get("tools"))
        else:
            message = self.reply(messages, body.get("tools"))
        if self.faults is not None:
            message = chat_fault(self.faults.draw(CHAT_KINDS), message)
            if self.faults_set == "paraphrased":
                message = paraphrased_fault(self.faults, messages, message, scenario_of(messages), self.customer_log)
            elif self.faults_set == "freeform":
                message = freeform_fault(self.faults, messages, message, scenario_of(messages), self.customer_log)
            elif self.faults_set == "roleplay":
                message = roleplay_fault(self.faults, messages, message, scenario_of(messages), self.customer_log)
            elif self.faults_set == "slips":
                scenario = scenario_of(messages)
                message = slips_fault(self.faults, messages, message, scenario, self.customer_log, body.get("tools"))
            else:
                message = customer_fault(self.faults, messages, message, scenario_of(messages))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish}
        words = sum(len(str(m.get("content") or "").split()) for m in messages)
        return 200, {
            "id": f"chatcmpl-{self.requests.total}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or "scripted-user"),
            "choices": [choice],
            "usage": {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1},
        }
