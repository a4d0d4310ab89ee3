"""Async client for SGLang's native ``/generate``: token ids in, token ids and log-probs out.

Wire format (request, then response)::

    POST /generate {"input_ids": [...], "sampling_params": {"max_new_tokens": N, ...},
                    "return_logprob": true, "rid": "..."}
    200 {"text": "...", "output_ids": [...],
         "meta_info": {"finish_reason": {"type": "stop"|"length"|"abort", "matched": ...},
                       "output_token_logprobs": [[logprob, token_id, text|null], ...], ...}}
    400 {"error": {"message": "..."}}      # e.g. prompt + max_new_tokens exceed the context

The only reader of ``meta_info`` as SGLang writes it. Retries and status classification are
``HTTPPolicyClient.generate`` (``policy.post_json_with_retries``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.errors import PolicyProtocolError
from slime_tau_plugin.engine.policy.client import FinishReason, GenerateResult, HTTPPolicyClient

logger = logging.getLogger(__name__)


class SGLangPolicy(HTTPPolicyClient):
    """A connection-reusing client for one SGLang server or router (see ``net/loop_http.py``)."""

    path = "/generate"

    def request(self, input_ids: Sequence[int], sampling_params: dict[str, Any], rid: str | None) -> dict[str, Any]:
        """``/generate``'s body: the ids, SGLang's sampling parameters as given, log-probs asked for, ``rid``."""
        payload: dict[str, Any] = {
            "input_ids": input_ids if isinstance(input_ids, list) else list(input_ids),  # the runner's is a copy
            "sampling_params": sampling_params,
            "return_logprob": True,
        }
        if rid is not None:
            payload["rid"] = rid
        return payload

    def result(self, body: Any, rid: str | None) -> GenerateResult:
        return parse_generate_response(body, rid)


def parse_generate_response(body: Any, rid: str | None = None) -> GenerateResult:
    """Turn SGLang's JSON into a :class:`GenerateResult` (the only reader of ``meta_info``).

    Raises:
        PolicyProtocolError: the body lacks ``meta_info``, log-probs, or ids and log-probs disagree.
    """
    if isinstance(body, list):  # batch form with one prompt
        body = body[0] if len(body) == 1 else body
    if not isinstance(body, dict) or not isinstance(body.get("meta_info"), dict):
        raise PolicyProtocolError(f"/generate body has no meta_info (rid={rid}): {str(body)[:200]!r}")
    meta = body["meta_info"]
    finish = meta.get("finish_reason") or {}
    try:
        finish_type = FinishReason(finish.get("type") if isinstance(finish, dict) else str(finish))
    except ValueError:
        raise PolicyProtocolError(f"unknown finish_reason {finish!r} (rid={rid})") from None
    entries = meta.get("output_token_logprobs")
    if entries is None:
        if finish_type is FinishReason.ABORT:
            entries = []
        else:
            raise PolicyProtocolError(f"meta_info has no output_token_logprobs; send return_logprob=true (rid={rid})")
    log_probs = tuple(float(e[0]) for e in entries)
    logprob_ids = tuple(int(e[1]) for e in entries)
    output_ids = tuple(int(t) for t in body.get("output_ids", logprob_ids))
    if output_ids != logprob_ids:
        raise PolicyProtocolError(
            f"output_ids ({len(output_ids)}) and output_token_logprobs ({len(logprob_ids)}) disagree (rid={rid})"
        )
    return GenerateResult(output_ids, log_probs, finish_type, meta)
