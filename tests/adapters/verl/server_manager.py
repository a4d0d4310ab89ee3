"""A stand-in for verl's ``LLMServerClient`` (the agent loop's ``server_manager``) and its rollout server.

It replaces one external seam: verl's Ray-hosted SGLang/vLLM engine. ``generate`` does what verl's
``SGLangHttpServer.generate`` (``verl/workers/rollout/sglang_rollout/async_sglang_server.py``) does with a
request, but over real HTTP to our SGLang-protocol server: ``max_new_tokens``/``max_tokens`` or else
``min(response_length, prompt_length + response_length - len(prompt))``, ``logprobs`` -> ``return_logprob``,
``TokenOutput(stop_reason=<SGLang finish type>)``. With ``style="vllm"`` it reports as verl's vLLM server
does: ``completed`` for a stop or a length cut, ``aborted`` for an abort, with no ids.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import numpy as np
from verl.workers.rollout.replica import TokenOutput


class HTTPServerManager:
    """Not a dataclass: ``hydra.utils.instantiate`` would turn one into a config node, as it would not verl's."""

    def __init__(
        self,
        base_url: str,
        *,
        prompt_length: int = 8192,
        response_length: int = 8192,
        style: str = "sglang",
        abort_on_call: int | None = None,
        global_steps: int = 7,
        routed_experts: tuple[int, int] | None = None,
    ) -> None:
        self.base_url, self.prompt_length, self.response_length = base_url, prompt_length, response_length
        self.style = style
        """``sglang`` or ``vllm``: which verl rollout server's ``stop_reason`` convention to follow."""
        self.abort_on_call = abort_on_call
        """Answer this call (0-based) with an engine abort instead of asking the server."""
        self.global_steps = global_steps
        self.routed_experts = routed_experts
        """(layers, experts per token): answer with a routed-experts array over prompt + output, as verl's
        SGLang server does with ``enable_rollout_routing_replay`` (entry = position % 8)."""
        self.calls: list[dict[str, Any]] = []
        """Every ``generate`` call: request_id, prompt_ids, sampling_params (as the loop passed them)."""
        self.bodies: dict[str, list[dict[str, Any]]] = {}
        """The /generate bodies sent, per verl request_id."""

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs):
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "params": dict(sampling_params)})
        steps = self.global_steps  # LLMServerClient.generate copies the server's global_steps into min/max
        extra = {"global_steps": steps, "min_global_steps": steps, "max_global_steps": steps}
        if self.abort_on_call is not None and len(self.calls) - 1 == self.abort_on_call:
            return TokenOutput(token_ids=[], log_probs=[], stop_reason="aborted", extra_fields=extra)
        params = dict(sampling_params)
        max_new = params.pop("max_new_tokens", None) or params.pop("max_tokens", None)
        if max_new is None:
            max_new = min(self.response_length, self.prompt_length + self.response_length - len(prompt_ids))
        return_logprob = bool(params.pop("logprobs", False))
        body = {
            "rid": uuid.uuid4().hex,  # verl sends a fresh id per turn; request_id only routes
            "input_ids": list(prompt_ids),
            "sampling_params": {**params, "max_new_tokens": max_new},
            "return_logprob": return_logprob,
        }
        self.bodies.setdefault(request_id, []).append(body)
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(f"{self.base_url}/generate", json=body)
        response.raise_for_status()
        out = response.json()
        meta = out["meta_info"]
        finish = (meta.get("finish_reason") or {}).get("type")
        token_ids = list(out["output_ids"])
        log_probs = [float(e[0]) for e in meta["output_token_logprobs"]] if return_logprob else None
        if self.style == "vllm":
            if finish == "abort":
                return TokenOutput(token_ids=[], log_probs=[], stop_reason="aborted", extra_fields=extra)
            finish = "completed"
        routed = None
        if self.routed_experts is not None:
            rows = np.arange(len(prompt_ids) + len(token_ids), dtype=np.int32) % 8
            routed = np.broadcast_to(rows[:, None, None], (len(rows), *self.routed_experts)).copy()
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs,
            routed_experts=routed,
            stop_reason=finish,
            num_preempted=0,
            extra_fields=extra,
        )
