"""Fault injection through ``generate`` over real HTTP with a real τ² retail environment.

Each case yields its documented status, the sample keeps every invariant, and nothing raises into slime.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers.fake_models import ScriptedModel, format_tool_call
from slime_tau_plugin.tools.servers.sglang_server import ModelOutput
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, requests_of, slime_args
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants, assert_tito
from tests.server_faults import FailingModel

GOOD_CALL = format_tool_call("find_user_id_by_email", {"email": "nobody@example.com"})


def run_one(tau2_backend, server, tokenizer_dir, session: str, sampling=None, **extra) -> Sample:
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    sample.session_id = session
    args = slime_args(server, tokenizer_dir, tau_domain="retail", tau_split="train", **extra)
    out = asyncio.run(generate(args, sample, dict(sampling or SAMPLING)))
    assert out is sample
    assert_sample_invariants(sample)
    return sample


def test_malformed_and_unknown_calls_are_fed_back_and_counted(tau2_backend, qwen25, qwen25_dir, serve):
    texts = [
        '<tool_call>\n{"name": "find_user_id_by_email", "arguments": {"email": }\n</tool_call>',
        '<tool_call>\n{"name": "teleport_user", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "find_user_id_by_email", "arguments": ["x"]}\n</tool_call>',
        GOOD_CALL,
        "I could not find your account.",
    ]
    server = serve(ScriptedModel(qwen25, texts))
    sample = run_one(tau2_backend, server, qwen25_dir, "malformed")
    assert_tito(sample, requests_of(server, sample))
    assert sample.status is Sample.Status.COMPLETED
    assert sample.metadata["parse_errors"] == 3 and sample.metadata["tool_calls"] == 1
    assert sample.metadata["num_turns"] == 5
    observations = [m["content"] for m in sample.metadata["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in observations[0]
    assert "unknown tool 'teleport_user'" in observations[1] and "find_user_id_by_email" in observations[1]
    assert "must be a JSON object" in observations[2]
    assert sample.reward == 0.0  # the task was not solved


def test_turn_without_end_of_turn_is_closed_by_the_template(tau2_backend, qwen25, qwen25_dir, serve):
    class NoEotOnce(ScriptedModel):
        def generate(self, input_ids, sampling_params):
            out = super().generate(input_ids, sampling_params)
            return ModelOutput(out.ids[:-1]) if self.turn_index(self.tokenizer.decode(input_ids)) == 0 else out

    server = serve(NoEotOnce(qwen25, [GOOD_CALL, "Done."]))
    sample = run_one(tau2_backend, server, qwen25_dir, "noeot")
    assert_tito(sample, requests_of(server, sample))
    eot = qwen25.convert_tokens_to_ids("<|im_end|>")
    first_run = sample.loss_mask.index(0)
    prompt_len = len(sample.tokens) - sample.response_length
    assert sample.tokens[prompt_len + first_run] == eot, "the missing <|im_end|> is appended with mask 0"
    full = qwen25.apply_chat_template(sample.metadata["messages"], tools=sample.metadata["tools"], tokenize=False)
    assert qwen25.encode(full, add_special_tokens=False)[: len(sample.tokens)] == sample.tokens


def test_budgets_keep_every_request_inside_the_context(tau2_backend, qwen25, qwen25_dir, serve):
    context = 7000  # a few thousand ids above the retail prompt: many turns, then the budget ends it
    server = serve(ScriptedModel(qwen25, [GOOD_CALL] * 50), context_len=context)
    # τ²'s error and step limits off (0): this test is about the token budget, not τ²'s harness rules
    sample = run_one(
        tau2_backend,
        server,
        qwen25_dir,
        "budget",
        rollout_max_context_len=context,
        tau_max_turns=1000,
        tau_max_errors=0,
        tau_max_steps=0,
    )
    for req in requests_of(server, sample):
        assert len(req["input_ids"]) + req["sampling_params"]["max_new_tokens"] <= context
    assert sample.status is Sample.Status.TRUNCATED
    # Either the clamped last generation hit its limit, or the next continuation would not have fit.
    assert sample.metadata["termination_reason"] in ("length", "budget_exhausted")
    assert sample.metadata["num_turns"] > 30 and len(sample.tokens) <= context


def test_response_budget_and_length_finish_truncate(tau2_backend, qwen25, qwen25_dir, serve):
    long_reply = "word " * 300
    server = serve(ScriptedModel(qwen25, [long_reply]))
    sample = run_one(tau2_backend, server, qwen25_dir, "length", tau_max_response_len=100)
    assert sample.status is Sample.Status.TRUNCATED
    assert sample.metadata["termination_reason"] == "length"
    assert sample.response_length == 100 and sum(sample.loss_mask) == 100
    assert requests_of(server, sample)[0]["sampling_params"]["max_new_tokens"] == 100


def test_sampling_params_pass_through_unchanged_but_for_max_new_tokens(tau2_backend, qwen25, qwen25_dir, serve):
    server = serve(ScriptedModel(qwen25, ["Hello."]))
    params = {**SAMPLING, "custom_params": {"return_top_p_token_ids": True}, "stop_token_ids": [151645]}
    snapshot = json.loads(json.dumps(params))
    sample = run_one(tau2_backend, server, qwen25_dir, "params", sampling=params, tau_max_tokens_per_turn=64)
    assert params == snapshot, "slime's dict must not be mutated"
    sent = requests_of(server, sample)[0]
    assert sent["sampling_params"] == {**snapshot, "max_new_tokens": 64}
    assert sent["return_logprob"] is True


def test_consistent_hashing_sends_the_routing_key_on_every_turn(tau2_backend, qwen25, qwen25_dir, serve):
    server = serve(ScriptedModel(qwen25, [GOOD_CALL, "Done."]))
    sample = run_one(tau2_backend, server, qwen25_dir, "routing", router_policy="consistent_hashing")
    keys = [
        {k.lower(): v for k, v in h.items()}.get("x-smg-routing-key")
        for r, h in zip(server.requests, server.request_headers, strict=True)
        if r["rid"].startswith("routing-")
    ]
    assert keys == ["routing"] * sample.metadata["num_turns"] and len(keys) == 2


def test_engine_abort_is_aborted(tau2_backend, qwen25, qwen25_dir, serve):
    class Aborting(ScriptedModel):
        def generate(self, input_ids, sampling_params):
            return ModelOutput(super().generate(input_ids, sampling_params).ids, abort=True)

    server = serve(Aborting(qwen25, ["A long answer that gets cut."]))
    sample = run_one(tau2_backend, server, qwen25_dir, "abort")
    assert sample.status is Sample.Status.ABORTED
    assert sample.metadata["termination_reason"] == "aborted"


def test_transient_5xx_is_retried_then_succeeds(tau2_backend, qwen25, qwen25_dir, serve):
    flaky = FailingModel(qwen25, 503, "engine overloaded", failures=2, texts=["Hello."])
    server = serve(flaky)
    sample = run_one(tau2_backend, server, qwen25_dir, "flaky")
    assert sample.status is Sample.Status.COMPLETED and flaky.failed == 2
    assert len(requests_of(server, sample)) == 3


def test_persistent_5xx_fails_the_sample_without_raising(tau2_backend, qwen25, qwen25_dir, serve):
    server = serve(FailingModel(qwen25, 500, "CUDA error: device-side assert"))
    sample = run_one(tau2_backend, server, qwen25_dir, "broken", tau_policy_retries=2)
    assert sample.status is Sample.Status.FAILED and sample.remove_sample
    assert "500" in sample.metadata["error"] and sample.metadata["termination_reason"] == "policy_error"
    assert sum(sample.loss_mask) == 0


def test_unreachable_server_fails_the_sample(tau2_backend, qwen25, qwen25_dir, serve):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve(ScriptedModel(qwen25, ["unused"]))
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    args = slime_args(server, qwen25_dir, tau_policy_retries=1)
    args.sglang_router_port = port
    asyncio.run(generate(args, sample, dict(SAMPLING)))
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.FAILED and "PolicyConnectionError" in sample.metadata["error"]


def test_unknown_task_fails_the_sample_with_the_reason(tau2_backend, qwen25, qwen25_dir, serve):
    server = serve(ScriptedModel(qwen25, ["unused"]))
    sample = Sample(prompt=0, metadata={"benchmark": "tau2", "domain": "retail", "split": "train", "task_id": "9999"})
    asyncio.run(generate(slime_args(server, qwen25_dir), sample, dict(SAMPLING)))
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.FAILED and "9999" in sample.metadata["error"]


def test_unknown_domain_in_config_names_the_valid_values(qwen25, qwen25_dir, serve):
    server = serve(ScriptedModel(qwen25, ["unused"]))
    with pytest.raises(ConfigError, match="airline, retail, telecom"):
        asyncio.run(generate(slime_args(server, qwen25_dir, tau_domain="retial"), Sample(prompt=0), dict(SAMPLING)))


def test_unknown_tool_call_parser_names_the_valid_ones(qwen25, qwen25_dir, serve):
    server = serve(ScriptedModel(qwen25, ["unused"]))
    args = slime_args(server, qwen25_dir, tau_tool_call_parser="qwen9")
    with pytest.raises(ConfigError, match="tau_tool_call_parser='qwen9' is unknown; expected one of .*qwen25"):
        asyncio.run(generate(args, Sample(prompt=0), dict(SAMPLING)))


def _run_with_heartbeat(args, sample) -> float:
    """Run one episode while a 10 ms heartbeat measures the event loop's worst stall (seconds)."""

    async def main() -> float:
        lags: list[float] = []
        done = asyncio.Event()

        async def beat() -> None:
            while not done.is_set():
                t0 = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - t0 - 0.01)

        beater = asyncio.create_task(beat())
        await generate(args, sample, dict(SAMPLING))
        done.set()
        await beater
        return max(lags)

    return asyncio.run(main())


def test_a_slow_environment_times_out_without_blocking_the_loop(tau2_backend, qwen25, qwen25_dir, serve, monkeypatch):
    """τ² itself is made slow (its Environment, not our code): the call times out, the loop keeps running."""
    import tau2.environment.environment as tau2_env

    server = serve(ScriptedModel(qwen25, [GOOD_CALL, "Done."]))
    args = slime_args(server, qwen25_dir, tau_env_timeout_s=2.0)
    warm = make_samples(tau2_backend, "retail", "train", 1)[0]
    asyncio.run(generate(args, warm, dict(SAMPLING)))  # one-off start-up (agent, template) off the clock
    assert warm.status is Sample.Status.COMPLETED

    real = tau2_env.Environment.get_response

    def slow(self, message):
        time.sleep(5.0)
        return real(self, message)

    monkeypatch.setattr(tau2_env.Environment, "get_response", slow)
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    worst_stall = _run_with_heartbeat(args, sample)
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.FAILED and sample.remove_sample
    assert sample.metadata["termination_reason"] == "env_error" and "timed out after 2.0s" in sample.metadata["error"]
    print(f"worst event-loop stall {worst_stall * 1000:.0f} ms")
    assert worst_stall < 0.15, worst_stall


def test_an_environment_exception_fails_the_sample_with_the_reason(
    tau2_backend, qwen25, qwen25_dir, serve, monkeypatch
):
    import tau2.environment.environment as tau2_env

    def broken(self, message):
        raise RuntimeError("database connection lost")

    monkeypatch.setattr(tau2_env.Environment, "get_response", broken)
    server = serve(ScriptedModel(qwen25, [GOOD_CALL, "Done."]))
    sample = run_one(tau2_backend, server, qwen25_dir, "env-exception")
    assert sample.status is Sample.Status.FAILED and sample.reward == 0.0
    assert "RuntimeError: database connection lost" in sample.metadata["error"]
