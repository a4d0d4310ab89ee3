"""The policy behind an OpenAI-compatible ``/v1/completions`` (vLLM's shape), over real HTTP to our server.

The same oracle episodes through ``generate`` give the same samples whether the policy is reached through
SGLang's ``/generate`` or through completions; the client classifies the server's failures as the
``/generate`` client does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from slime_tau_plugin.engine.errors import ContextLengthError, PolicyHTTPError, PolicyProtocolError
from slime_tau_plugin.engine.net.retry import RetrySettings
from slime_tau_plugin.engine.policy.client import FinishReason
from slime_tau_plugin.engine.policy.openai import OpenAICompletionsPolicy
from slime_tau_plugin.tools.servers.fake_models import ScriptedModel
from slime_tau_plugin.tools.servers.http_base import JSONServer
from slime_tau_plugin.tools.servers.sglang_server import fake_logprob
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, run_all, slime_args
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants, assert_tito
from tests.server_faults import FailingModel

FAST_RETRY = RetrySettings(attempts=3, backoff_s=0.01, max_backoff_s=0.02)


def completion_requests_of(server, sample, since: int) -> list[dict[str, Any]]:
    """This sample's completions bodies (each prompt is a prefix of its tokens) as ``/generate``-like bodies."""
    mine = [r for r in server.completion_requests[since:] if sample.tokens[: len(r["prompt"])] == r["prompt"]]
    return [{"input_ids": r["prompt"]} for r in sorted(mine, key=lambda r: len(r["prompt"]))]


@pytest.mark.parametrize(("domain", "split", "count"), [("retail", "train", 4), ("airline", "test", 2)])
def test_completions_give_the_same_samples_as_generate(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, domain, split, count
):
    server = oracle_server_factory(qwen25, ((domain, split),))
    native = make_samples(tau2_backend, domain, split, count)
    completions = make_samples(tau2_backend, domain, split, count)
    for a, b in zip(native, completions, strict=True):  # own rids on the shared server (other tests match rids)
        a.session_id, b.session_id = f"openai-native-{a.session_id}", f"openai-cmpl-{b.session_id}"
    asyncio.run(run_all(slime_args(server, qwen25_dir, tau_domain=domain, tau_split=split), native))
    since = len(server.completion_requests)
    args = slime_args(server, qwen25_dir, tau_domain=domain, tau_split=split, tau_policy_api="openai-completions")
    asyncio.run(run_all(args, completions))
    first = server.completion_requests[since]
    assert "model" not in first and first["logprobs"] == 0 and first["max_tokens"] >= 1
    assert first["return_token_ids"] and first["return_tokens_as_token_ids"]
    sent = server.completion_requests[since:]
    asked = sum(bool(r["return_token_ids"]) for r in sent)
    assert asked <= count < len(sent), "after the first answer, token_id:N tokens suffice: no prompt echo"
    for a, b in zip(native, completions, strict=True):
        assert_sample_invariants(b)
        assert_tito(b, completion_requests_of(server, b, since))
        assert b.status is Sample.Status.COMPLETED and b.reward == 1.0, b.metadata.get("error")
        assert b.tokens == a.tokens and b.response_length == a.response_length
        assert b.loss_mask == a.loss_mask and b.rollout_log_probs == a.rollout_log_probs
        assert (b.reward, b.status, b.weight_versions) == (a.reward, a.status, a.weight_versions)
        assert b.metadata["num_turns"] == a.metadata["num_turns"] == len(completion_requests_of(server, b, since))


def test_unknown_model_name_fails_the_sample_at_once_and_says_which_setting(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    sample.session_id = "openai-404"
    since = len(server.completion_requests)
    args = slime_args(server, qwen25_dir, tau_policy_api="openai-completions", tau_policy_model="no-such-model")
    asyncio.run(run_all(args, [sample]))
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.FAILED
    assert "404" in sample.metadata["error"] and "tau_policy_model='no-such-model'" in sample.metadata["error"]
    assert len(server.completion_requests) == since + 1, "a 4xx is not retried"


def test_sglang_openai_models_accept_the_request_and_their_answer_parses():
    """SGLang's own pydantic models (installed 0.5.23): our body validates, its answer shape parses."""
    import sys

    from slime_tau_plugin.engine.chat.tool_calls import import_sglang_parsers
    from slime_tau_plugin.engine.policy.openai import completions_request, parse_completions_response

    import_sglang_parsers()
    proto = sys.modules["sglang.srt.entrypoints.openai.protocol"]
    request = proto.CompletionRequest(**completions_request([1, 2, 3], {**SAMPLING, "sampling_seed": 7}, None))
    assert (request.prompt, request.max_tokens, request.seed) == ([1, 2, 3], SAMPLING["max_new_tokens"], 7)
    assert request.logprobs == 0 and request.return_token_ids and request.skip_special_tokens is False
    logprobs = proto.LogProbs(tokens=["Hi", "<|im_end|>"], token_logprobs=[-0.5, -0.25], text_offset=[-1, -1])
    choice = proto.CompletionResponseChoice(
        index=0, text="Hi", logprobs=logprobs, finish_reason="stop", matched_stop=151645, token_ids=[13048, 151645]
    )
    usage = proto.UsageInfo(prompt_tokens=3, completion_tokens=2, total_tokens=5)
    answer = proto.CompletionResponse(
        id="c1", model="default", choices=[choice], usage=usage, metadata={"weight_version": "w7"}
    )
    result = parse_completions_response(json.loads(answer.model_dump_json()))
    assert result.output_ids == (13048, 151645) and result.log_probs == (-0.5, -0.25)
    assert result.meta_info["finish_reason"] == {"type": "stop", "matched": 151645}
    assert result.meta_info["weight_version"] == "w7"


# --- the client alone, against the built-in server ------------------------------------------------


def _prompt(tokenizer) -> list[int]:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    return tokenizer.encode(text, add_special_tokens=False)


def _generate(server, prompt: list[int], max_new: int = 64, **client: Any):
    params = {**SAMPLING, "max_new_tokens": max_new}
    policy = OpenAICompletionsPolicy(server.url + "/v1", retry=FAST_RETRY, **client)

    async def run():
        try:
            return await policy.generate(prompt, params, rid="t-0")
        finally:
            await policy.aclose()

    return asyncio.run(run())


def test_stop_token_is_kept_with_its_log_prob(qwen25, serve):
    server = serve(ScriptedModel(qwen25, ["Hello there."]))
    prompt = _prompt(qwen25)
    result = _generate(server, prompt, model=server.model_id)
    eot = qwen25.convert_tokens_to_ids("<|im_end|>")
    assert result.finish_reason is FinishReason.STOP and result.output_ids[-1] == eot
    assert qwen25.decode(result.output_ids) == "Hello there.<|im_end|>"
    assert result.log_probs == tuple(fake_logprob(t, i) for i, t in enumerate(result.output_ids))
    assert result.meta_info["prompt_tokens"] == len(prompt) and result.meta_info["weight_version"] == "default"


def test_length_cut_returns_exactly_max_tokens(qwen25, serve):
    server = serve(ScriptedModel(qwen25, ["A reply that is much longer than three tokens."]))
    result = _generate(server, _prompt(qwen25), max_new=3)
    assert result.finish_reason is FinishReason.LENGTH and len(result.output_ids) == 3 == len(result.log_probs)


def test_abort_while_in_flight_is_a_finish_reason(qwen25, serve):
    server = serve(ScriptedModel(qwen25, ["A long answer that gets cut."]), latency_s=10.0)

    async def run():
        policy = OpenAICompletionsPolicy(server.url, retry=FAST_RETRY)
        task = asyncio.ensure_future(policy.generate(_prompt(qwen25), dict(SAMPLING), rid="a-0"))
        while server.num_running == 0:
            await asyncio.sleep(0.01)
        server.abort(abort_all=True)
        try:
            return await task
        finally:
            await policy.aclose()

    result = asyncio.run(run())
    assert result.finish_reason is FinishReason.ABORT and len(result.output_ids) == len(result.log_probs)


def test_context_overflow_is_a_context_length_error_not_retried(qwen25, serve):
    prompt = _prompt(qwen25)
    server = serve(ScriptedModel(qwen25, ["unused"]), context_len=len(prompt) + 10)
    with pytest.raises(ContextLengthError, match="maximum context length"):
        _generate(server, prompt, max_new=11)
    assert len(server.completion_requests) == 1


def test_persistent_5xx_is_retried_then_an_http_error(qwen25, serve):
    server = serve(FailingModel(qwen25, 503, "engine overloaded"))
    with pytest.raises(PolicyHTTPError) as caught:
        _generate(server, _prompt(qwen25))
    assert caught.value.status == 503 and not isinstance(caught.value, ContextLengthError)
    assert len(server.completion_requests) == FAST_RETRY.attempts


def test_transient_5xx_is_retried_then_succeeds(qwen25, serve):
    server = serve(FailingModel(qwen25, 500, "CUDA error", failures=1, texts=["Hello."]))
    assert _generate(server, _prompt(qwen25)).finish_reason is FinishReason.STOP
    assert len(server.completion_requests) == 2


class _MalformedServer(JSONServer):
    """Answers ``/v1/completions`` 200 with a choice that carries text but no token ids."""

    name = "malformed-completions"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def post_routes(self):
        def reply(body, headers):
            self.calls += 1
            choice = {"index": 0, "text": "Hello.", "finish_reason": "stop", "logprobs": None}
            return 200, {"id": "x", "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}

        return {"/v1/completions": reply}


def test_a_2xx_without_token_ids_is_a_protocol_error_not_retried(qwen25):
    with _MalformedServer() as server:
        with pytest.raises(PolicyProtocolError, match="no token ids"):
            _generate(server, _prompt(qwen25))
        assert server.calls == 1
