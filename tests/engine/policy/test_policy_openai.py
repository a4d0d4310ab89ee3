"""The OpenAI-compatible completions client's request and response shapes (vLLM and SGLang; no HTTP)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError, ContextLengthError, PolicyProtocolError
from slime_tau_plugin.engine.policy.client import FinishReason, classify_client_error
from slime_tau_plugin.engine.policy.openai import (
    OpenAICompletionsPolicy,
    completions_request,
    parse_completions_response,
)

SLIME_SAMPLING = {
    "temperature": 0.7,
    "top_p": 0.9,
    "top_k": -1,
    "max_new_tokens": 128,
    "stop_token_ids": [151645],
    "no_stop_trim": True,
    "skip_special_tokens": False,
    "sampling_seed": 3,
}


def _vllm_body(
    ids: list[int],
    log_probs: list[float],
    finish: str = "stop",
    *,
    token_ids: bool = True,
    as_ids: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """vLLM's CompletionResponse for one choice."""
    choice: dict[str, Any] = {
        "index": 0,
        "text": "ignored",
        "finish_reason": finish,
        "stop_reason": extra.pop("stop_reason", None),
        "logprobs": {
            "text_offset": list(range(len(ids))),
            "token_logprobs": log_probs,
            "tokens": [f"token_id:{t}" if as_ids else f"t{t}" for t in ids],
            "top_logprobs": [None] * len(ids),
        },
    }
    if token_ids:
        choice["token_ids"], choice["prompt_token_ids"] = ids, [1, 2, 3]
    usage = {"prompt_tokens": 3, "completion_tokens": len(ids), "total_tokens": 3 + len(ids)}
    return {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [choice], "usage": usage, **extra}


def test_request_translates_sglang_names_and_asks_for_ids_and_logprobs() -> None:
    body = completions_request([5, 6, 7], SLIME_SAMPLING, None)
    assert body["prompt"] == [5, 6, 7] and "model" not in body
    assert body["max_tokens"] == 128 and body["seed"] == 3
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.7, 0.9, -1)
    assert body["stop_token_ids"] == [151645] and body["skip_special_tokens"] is False
    assert body["logprobs"] == 0 and body["return_token_ids"] and body["return_tokens_as_token_ids"]
    assert body["include_stop_str_in_output"] is True and body["stream"] is False
    assert not {"max_new_tokens", "no_stop_trim", "sampling_seed"} & set(body)


def test_request_can_leave_out_return_token_ids() -> None:
    body = completions_request([1], {"max_new_tokens": 4}, None, return_token_ids=False)
    assert body["return_token_ids"] is False and body["return_tokens_as_token_ids"] is True


def test_request_names_the_model_when_configured() -> None:
    assert completions_request([1], {"max_new_tokens": 4}, "Qwen/Qwen3-4B")["model"] == "Qwen/Qwen3-4B"


def test_unknown_sampling_parameter_is_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="slime_tau_plugin.engine.policy.openai"):
        body = completions_request([1], {"max_new_tokens": 4, "json_schema_unit_test": "{}"}, None)
    assert "json_schema_unit_test" not in body
    assert "json_schema_unit_test" in caplog.text


def test_base_url_with_or_without_v1_is_the_same_server() -> None:
    assert OpenAICompletionsPolicy("http://h:8000/v1/").base_url == "http://h:8000"
    assert OpenAICompletionsPolicy("http://h:8000").base_url == "http://h:8000"


def test_token_ids_and_log_probs_become_a_generate_result() -> None:
    body = _vllm_body([11, 12, 151645], [-0.1, -0.2, -0.3], stop_reason=151645)
    result = parse_completions_response(body, "r1")
    assert result.output_ids == (11, 12, 151645)
    assert result.log_probs == (-0.1, -0.2, -0.3)
    assert result.finish_reason is FinishReason.STOP
    assert result.meta_info["finish_reason"] == {"type": "stop", "matched": 151645}
    assert (result.meta_info["prompt_tokens"], result.meta_info["completion_tokens"]) == (3, 3)
    assert "weight_version" not in result.meta_info and "cached_tokens" not in result.meta_info


def test_ids_come_from_token_id_strings_when_the_server_ignores_return_token_ids() -> None:
    result = parse_completions_response(_vllm_body([7, 8], [-1.0, -2.0], token_ids=False))
    assert result.output_ids == (7, 8) and result.log_probs == (-1.0, -2.0)


def test_sglang_shape_with_text_tokens_and_token_ids() -> None:
    body = _vllm_body([7, 8], [-1.0, -2.0], as_ids=False, metadata={"weight_version": "v3"})
    body["choices"][0].pop("stop_reason")
    body["choices"][0]["matched_stop"] = 8
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 2}
    result = parse_completions_response(body)
    assert result.output_ids == (7, 8)
    assert result.meta_info["weight_version"] == "v3" and result.meta_info["cached_tokens"] == 2
    assert result.meta_info["finish_reason"]["matched"] == 8


def test_text_tokens_without_token_ids_is_a_protocol_error_with_the_fix() -> None:
    with pytest.raises(PolicyProtocolError, match="return_tokens_as_token_ids"):
        parse_completions_response(_vllm_body([7, 8], [-1.0, -2.0], token_ids=False, as_ids=False), "r2")


def test_token_ids_that_disagree_with_the_token_strings_are_a_protocol_error() -> None:
    body = _vllm_body([7, 8], [-1.0, -2.0])
    body["choices"][0]["token_ids"] = [7, 9]
    with pytest.raises(PolicyProtocolError, match="disagree"):
        parse_completions_response(body)


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("length", FinishReason.LENGTH), ("abort", FinishReason.ABORT), ("repetition", FinishReason.LENGTH)],
)
def test_finish_reasons_map_to_ours(finish: str, expected: FinishReason) -> None:
    result = parse_completions_response(_vllm_body([4], [-0.5], finish=finish))
    assert result.finish_reason is expected and result.meta_info["finish_reason"]["type"] == expected.value


def test_abort_before_any_token_is_an_empty_result() -> None:
    body = _vllm_body([], [], finish="abort", token_ids=False)
    body["choices"][0]["logprobs"] = None
    result = parse_completions_response(body)
    assert result.output_ids == () and result.finish_reason is FinishReason.ABORT


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b.update(choices=[]), "no single choice"),
        (lambda b: b["choices"][0].update(finish_reason="content_filter"), "unknown finish_reason"),
        (lambda b: b["choices"][0].update(finish_reason=None), "unknown finish_reason"),
        (lambda b: b["choices"][0]["logprobs"]["token_logprobs"].__setitem__(0, None), "no log-prob"),
        (lambda b: b["choices"][0].update(logprobs=None), "2 output ids but 0 log-probs"),
        (lambda b: b["choices"][0].update(token_ids="7,8"), "token_ids"),
    ],
)
def test_malformed_bodies_are_protocol_errors(mutate, match: str) -> None:
    body = _vllm_body([7, 8], [-1.0, -2.0])
    mutate(body)
    with pytest.raises(PolicyProtocolError, match=match):
        parse_completions_response(body, "r3")


def test_a_non_object_body_is_a_protocol_error() -> None:
    with pytest.raises(PolicyProtocolError):
        parse_completions_response(["not", "a", "completion"])


def test_vllm_context_length_400_is_a_context_length_error() -> None:
    message = (
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 "
        "tokens and your request has 2778 input tokens (8000 > 4096 - 2778)."
    )
    body = json.dumps({"error": {"message": message, "type": "BadRequestError", "param": "max_tokens", "code": 400}})
    exc = classify_client_error(400, body, "r4", "/v1/completions")
    assert isinstance(exc, ContextLengthError) and "POST /v1/completions answered 400" in str(exc)


def test_policy_api_is_validated_and_names_the_valid_values() -> None:
    with pytest.raises(
        ConfigError, match="tau_policy_api='vllm' is unknown; expected one of nemo-rl, openai-completions, sglang"
    ):
        TauConfig(policy_api="vllm")
    config = TauConfig(policy_api="openai-completions", policy_model="Qwen/Qwen3-4B")
    assert (config.policy_api, config.policy_model) == ("openai-completions", "Qwen/Qwen3-4B")
