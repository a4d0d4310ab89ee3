"""Reading SGLang's ``/generate`` body and classifying its 4xx answers (no HTTP involved)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slime_tau_plugin.engine.errors import ContextLengthError, PolicyHTTPError, PolicyProtocolError
from slime_tau_plugin.engine.policy.client import FinishReason, GenerateResult, classify_client_error
from slime_tau_plugin.engine.policy.sglang import parse_generate_response


def _body(ids: list[int], log_probs: list[float], finish: str = "stop", **meta: Any) -> dict[str, Any]:
    return {
        "text": "ignored",
        "output_ids": ids,
        "meta_info": {
            "finish_reason": {"type": finish, "matched": 2},
            "output_token_logprobs": [[lp, i, None] for i, lp in zip(ids, log_probs, strict=True)],
            **meta,
        },
    }


def test_valid_body_becomes_a_generate_result() -> None:
    body = _body([5, 6, 2], [-0.1, -0.2, -0.3], weight_version="3")
    result = parse_generate_response(body, "r1")
    assert isinstance(result, GenerateResult)
    assert result.output_ids == (5, 6, 2)
    assert result.log_probs == (-0.1, -0.2, -0.3)
    assert result.finish_reason is FinishReason.STOP
    assert result.meta_info["weight_version"] == "3"


def test_length_finish_is_reported() -> None:
    assert parse_generate_response(_body([7], [-1.0], finish="length")).finish_reason is FinishReason.LENGTH


def test_single_item_batch_body_is_unwrapped() -> None:
    assert parse_generate_response([_body([9], [-0.5])]).output_ids == (9,)


def test_output_ids_without_field_come_from_log_prob_entries() -> None:
    body = _body([4, 8], [-0.1, -0.2])
    del body["output_ids"]
    assert parse_generate_response(body).output_ids == (4, 8)


def test_ids_that_disagree_with_log_prob_entries_are_a_protocol_error() -> None:
    body = _body([5, 6], [-0.1, -0.2])
    body["output_ids"] = [5, 6, 2]
    with pytest.raises(PolicyProtocolError, match=r"output_ids \(3\).*output_token_logprobs \(2\).*rid=r9"):
        parse_generate_response(body, "r9")


def test_same_length_but_different_ids_are_a_protocol_error() -> None:
    body = _body([5, 6], [-0.1, -0.2])
    body["output_ids"] = [5, 7]
    with pytest.raises(PolicyProtocolError, match="disagree"):
        parse_generate_response(body)


@pytest.mark.parametrize("body", [{"text": "x", "output_ids": [1]}, {"meta_info": "nope"}, "not json", None])
def test_missing_meta_info_is_a_protocol_error(body: Any) -> None:
    with pytest.raises(PolicyProtocolError, match="no meta_info"):
        parse_generate_response(body, "r2")


def test_missing_log_probs_on_a_finished_generation_is_a_protocol_error() -> None:
    body = {"output_ids": [1], "meta_info": {"finish_reason": {"type": "stop"}}}
    with pytest.raises(PolicyProtocolError, match="return_logprob"):
        parse_generate_response(body)


def test_unknown_finish_reason_is_a_protocol_error() -> None:
    with pytest.raises(PolicyProtocolError, match="unknown finish_reason"):
        parse_generate_response(_body([1], [-0.1], finish="exploded"))


def test_abort_without_log_probs_is_an_empty_abort_result() -> None:
    body = {"text": "", "meta_info": {"finish_reason": {"type": "abort", "message": "aborted by request"}}}
    result = parse_generate_response(body)
    assert (result.output_ids, result.log_probs, result.finish_reason) == ((), (), "abort")


def _error_body(message: str) -> str:
    return json.dumps({"error": {"message": message}})


@pytest.mark.parametrize(
    "message",
    [
        "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
        "Requested token count exceeds the model's maximum context length of 32768 tokens.",
    ],
)
def test_400_about_the_context_is_a_context_length_error(message: str) -> None:
    exc = classify_client_error(400, _error_body(message), "r3")
    assert isinstance(exc, ContextLengthError)
    assert exc.status == 400
    assert message in str(exc) and "rid=r3" in str(exc)


def test_other_400_is_an_http_error_but_not_a_context_length_error() -> None:
    body = _error_body("temperature must be non-negative")
    exc = classify_client_error(400, body, "r4")
    assert isinstance(exc, PolicyHTTPError)
    assert not isinstance(exc, ContextLengthError)
    assert (exc.status, exc.body) == (400, body)


def test_context_wording_on_a_non_400_status_is_not_a_context_length_error() -> None:
    exc = classify_client_error(413, _error_body("input longer than the context"), None)
    assert not isinstance(exc, ContextLengthError)
    assert exc.status == 413


def test_non_json_error_body_is_quoted_in_the_message() -> None:
    exc = classify_client_error(400, "Bad Request: malformed sampling_params", "r5")
    assert type(exc) is PolicyHTTPError
    assert "malformed sampling_params" in str(exc)
