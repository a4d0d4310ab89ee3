"""``TauAgentLoop`` against verl's real agent-loop classes, dataset and batching, over real HTTP to our oracle.

Rows are written by ``verl_rows``, read back by verl's ``RLHFDataset``; the loop is built from
``configs/verl/tau_agent_loop.yaml`` the way verl's ``AgentLoopWorker`` builds it (the YAML entry through
``hydra.utils.instantiate``); outputs go through verl's own per-sample padding and batch assembly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import hydra
import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.utils.dataset.rl_dataset import RLHFDataset

from slime_tau_plugin.adapters.verl.agent_loop import EXTRA_FIELD_KEYS, TauAgentLoop
from slime_tau_plugin.adapters.verl.rows import verl_rows
from slime_tau_plugin.tools.servers.sglang_server import fake_logprob
from tests.adapters.verl.conftest import AGENT_LOOP_YAML, refs_with_tasks, verl_config
from tests.adapters.verl.rows import write_verl_parquet
from tests.adapters.verl.server_manager import HTTPServerManager

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": False}


def make_loop(config, server_manager, tokenizer) -> TauAgentLoop:
    """As ``AgentLoopWorker.__init__`` + ``_run_agent_loop`` do: YAML entries into the registry, then instantiate."""
    for entry in OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path):
        _agent_loop_registry[entry.name] = entry
    loop = hydra.utils.instantiate(
        config=_agent_loop_registry["tau_agent"],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )
    assert isinstance(loop, TauAgentLoop)
    return loop


def dataset_rows(tmp_path: Path, config, tokenizer, refs, evaluation: bool = False) -> list[dict]:
    """``verl_rows`` -> parquet -> verl's ``RLHFDataset`` -> what ``run(**row)`` receives."""
    path = write_verl_parquet(verl_rows(refs, evaluation=evaluation), tmp_path / "tasks.parquet")
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config.data)
    rows = []
    for i in range(len(dataset)):
        row = dataset[i]
        row.pop("dummy_tensor")  # a tensor: it rides in verl's batch, not in the loop's kwargs
        assert row.pop("agent_name") == "tau_agent"  # _run_agent_loop takes it as its own argument
        rows.append(row)
    return rows


def run_rows(loop_factory, rows, sampling=SAMPLING) -> list[AgentLoopOutput]:
    async def main():
        return await asyncio.gather(*[loop_factory().run(dict(sampling), **row) for row in rows])

    return asyncio.run(main())


def verl_batch(config, tokenizer, outputs, rows):
    """verl's own per-sample padding and batch assembly (``AgentLoopWorker`` methods, without Ray)."""
    worker = object.__new__(AgentLoopWorker)
    worker.config, worker.rollout_config, worker.tokenizer = config, config.actor_rollout_ref.rollout, tokenizer
    worker.processor, worker.reward_loop_worker_handles, worker.distillation_enabled = None, None, False
    worker.mm_processor_kwargs = {}

    async def main():
        return [await worker._agent_loop_postprocess(o, False, **row) for o, row in zip(outputs, rows, strict=True)]

    return worker._postprocess(asyncio.run(main()))


def assert_output_invariants(out: AgentLoopOutput, config) -> None:
    rollout = config.actor_rollout_ref.rollout
    n = len(out.response_ids)
    assert 1 <= n <= rollout.response_length and 1 <= len(out.prompt_ids) <= rollout.prompt_length
    assert len(out.response_mask) == n and len(out.response_logprobs) == n
    assert set(out.response_mask) <= {0, 1}
    for mask, logprob in zip(out.response_mask, out.response_logprobs, strict=True):
        assert logprob == 0.0 if mask == 0 else logprob < 0.0
    assert tuple(out.extra_fields) == EXTRA_FIELD_KEYS, "one key set for every output (verl concatenates them)"
    if out.extra_fields["status"] in ("failed", "aborted"):
        assert sum(out.response_mask) == 0 and out.reward_score == 0.0 and out.extra_fields["error"] is not None


def assert_turns_exact(out: AgentLoopOutput, bodies: list[dict]) -> None:
    """Each request extends the previous by its output and a continuation; mask 1 exactly on sampled ids,
    each with the log-prob the server gave it at that position (TITO)."""
    held = out.prompt_ids + out.response_ids
    prompt_len, expected_mask = len(out.prompt_ids), [0] * len(out.response_ids)
    for body in bodies:
        ids = body["input_ids"]
        assert held[: len(ids)] == ids and body["return_logprob"] is True
        start = end = len(ids) - prompt_len
        while end < len(out.response_ids) and out.response_mask[end] == 1:
            expected_mask[end] = 1
            assert out.response_logprobs[end] == fake_logprob(out.response_ids[end], end - start)
            end += 1
    assert expected_mask == out.response_mask


@pytest.mark.parametrize(("domain", "split", "count"), [("retail", "train", 4), ("airline", "test", 3)])
@pytest.mark.parametrize("style", ["sglang", "vllm"])
def test_oracle_earns_reward_one_with_exact_tokens(
    tmp_path, tau2_backend, qwen25, oracle_server, domain, split, count, style
):
    config = verl_config("+tau.record_messages=true")
    manager = HTTPServerManager(oracle_server.url, style=style)
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, domain, split, count))
    outputs = run_rows(lambda: make_loop(config, manager, qwen25), rows)
    for out in outputs:
        fields = out.extra_fields
        assert_output_invariants(out, config)
        assert out.reward_score == 1.0, fields
        assert fields["status"] == "completed" and fields["error"] is None and fields["tool_call_counts"] >= 1
        assert fields["reward_extra_info"]["acc"] == 1.0 and fields["tau_task"].startswith(f"tau2/{domain}/{split}/")
        assert fields["min_global_steps"] == fields["max_global_steps"] == manager.global_steps
        assert out.num_turns == 1 + 2 * fields["model_turns"] - 1, "prompt, each generation, each reply round"
        assert out.metrics.num_preempted == 0 and out.metrics.generate_sequences > 0
        # one sticky request id per episode; every turn's body extends the last (TITO)
        mine = [c for c in manager.calls if c["prompt_ids"][: len(out.prompt_ids)] == out.prompt_ids]
        request_ids = {c["request_id"] for c in mine}
        assert len(request_ids) == 1
        bodies = manager.bodies[request_ids.pop()]
        assert len(bodies) == fields["model_turns"]
        assert_turns_exact(out, bodies)
        # Qwen2.5 does not rewrite history: the held ids are the template's own ids for the conversation
        text = qwen25.apply_chat_template(fields["messages"], tools=fields["tools"], tokenize=False)
        full = qwen25.encode(text, add_special_tokens=False)
        assert full[: len(out.prompt_ids) + len(out.response_ids)] == out.prompt_ids + out.response_ids
        assert qwen25.decode(full[len(out.prompt_ids) + len(out.response_ids) :]) == "\n"
    batch = verl_batch(config, qwen25, outputs, rows)
    assert batch.batch["rm_scores"].sum().item() == float(count)
    for i, out in enumerate(outputs):  # verl puts the reward on the last response id
        assert batch.batch["rm_scores"][i, len(out.response_ids) - 1].item() == 1.0
        assert batch.batch["response_mask"][i].sum().item() == sum(out.response_mask)
        assert batch.batch["rollout_log_probs"][i, : len(out.response_ids)].tolist() == pytest.approx(
            out.response_logprobs
        )


def test_server_down_gives_an_untrained_zero_reward_output(tmp_path, tau2_backend, qwen25, oracle_server):
    config = verl_config("+tau.policy_retries=1")
    down = HTTPServerManager("http://127.0.0.1:9")  # discard port: nothing listens
    up = HTTPServerManager(oracle_server.url)
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 2))
    failed = run_rows(lambda: make_loop(config, down, qwen25), rows[:1])[0]
    assert_output_invariants(failed, config)
    assert failed.reward_score == 0.0 and sum(failed.response_mask) == 0
    assert failed.extra_fields["status"] == "failed"
    assert failed.extra_fields["termination_reason"] == "policy_error"
    assert "ConnectError" in failed.extra_fields["error"] and failed.extra_fields["reward_extra_info"]["failed"] == 1.0
    ok = run_rows(lambda: make_loop(config, up, qwen25), rows[1:])[0]
    batch = verl_batch(config, qwen25, [failed, ok], rows)  # one batch of both: the key sets agree
    assert batch.batch["rm_scores"].sum().item() == 1.0 and batch.batch["response_mask"][0].sum().item() == 0


def test_engine_abort_is_not_trained(tmp_path, tau2_backend, qwen25, oracle_server):
    config = verl_config()
    manager = HTTPServerManager(oracle_server.url, style="vllm", abort_on_call=1)
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))
    out = run_rows(lambda: make_loop(config, manager, qwen25), rows)[0]
    assert_output_invariants(out, config)
    assert out.extra_fields["termination_reason"] == "aborted" and out.extra_fields["status"] == "aborted"
    assert out.reward_score == 0.0 and sum(out.response_mask) == 0 and len(manager.calls) == 2


def test_a_row_without_a_task_fails_without_raising(qwen25, oracle_server):
    config = verl_config()
    loop = make_loop(config, HTTPServerManager(oracle_server.url), qwen25)
    out = asyncio.run(loop.run(dict(SAMPLING), raw_prompt=[], extra_info={"index": 3}, index=3))
    assert_output_invariants(out, config)
    assert out.extra_fields["status"] == "failed" and "names no task" in out.extra_fields["error"]


def test_verl_response_length_bounds_the_whole_response(tmp_path, tau2_backend, qwen25, oracle_server):
    config = verl_config("data.max_response_length=700")
    manager = HTTPServerManager(oracle_server.url, response_length=700)
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 2))
    for out in run_rows(lambda: make_loop(config, manager, qwen25), rows):
        assert_output_invariants(out, config)
        assert out.extra_fields["termination_reason"] == "budget_exhausted", out.extra_fields
        assert out.extra_fields["status"] == "truncated" and sum(out.response_mask) > 0, "truncated episodes train"
        assert out.reward_score == 0.0
    assert all(c["params"]["max_new_tokens"] <= 700 for c in manager.calls)


def test_a_turn_cut_at_max_tokens_is_a_length_stop_even_when_verl_says_completed(
    tmp_path, tau2_backend, qwen25, oracle_server
):
    config = verl_config("+tau.max_tokens_per_turn=5")
    manager = HTTPServerManager(oracle_server.url, style="vllm")
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))
    out = run_rows(lambda: make_loop(config, manager, qwen25), rows)[0]
    assert_output_invariants(out, config)
    assert out.extra_fields["termination_reason"] == "length" and out.response_mask == [1] * 5


def test_a_prompt_longer_than_verl_prompt_length_stops_before_generating(tmp_path, tau2_backend, qwen25):
    config = verl_config("data.max_prompt_length=1024")
    manager = HTTPServerManager("http://127.0.0.1:9", prompt_length=1024)
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "airline", "test", 1))
    out = run_rows(lambda: make_loop(config, manager, qwen25), rows)[0]
    assert_output_invariants(out, config)  # the prompt is cut to fit verl's padding; nothing trains
    assert "rollout.prompt_length=1024" in out.extra_fields["error"] and manager.calls == []
    verl_batch(config, qwen25, [out], rows)


def test_yaml_entry_registers_the_loop_by_name():
    import slime_tau_plugin.adapters.verl.agent_loop  # noqa: F401  (@register runs on import)

    entries = OmegaConf.load(AGENT_LOOP_YAML)
    assert [e.name for e in entries] == ["tau_agent"]
    assert entries[0]["_target_"] == "slime_tau_plugin.adapters.verl.agent_loop.TauAgentLoop"
    assert _agent_loop_registry["tau_agent"]["_target_"] == "slime_tau_plugin.adapters.verl.agent_loop.TauAgentLoop"


def test_routed_experts_of_the_last_turn_and_zeros_for_a_failure(tmp_path, tau2_backend, qwen25, oracle_server):
    config = verl_config("actor_rollout_ref.rollout.enable_rollout_routing_replay=true")
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 2))
    manager = HTTPServerManager(oracle_server.url, routed_experts=(3, 2))
    ok = run_rows(lambda: make_loop(config, manager, qwen25), rows[:1])[0]
    last_request = manager.calls[-1]["prompt_ids"]
    assert ok.reward_score == 1.0 and ok.routed_experts.shape[1:] == (3, 2)
    generated_last = len(ok.prompt_ids) + len(ok.response_ids) - len(last_request)
    assert ok.routed_experts.shape[0] == len(last_request) + generated_last  # the newest turn covers all before
    assert ok.routed_experts[:, 0, 0].tolist() == [i % 8 for i in range(ok.routed_experts.shape[0])]
    down = HTTPServerManager("http://127.0.0.1:9", routed_experts=(3, 2))
    failed = run_rows(lambda: make_loop(config, down, qwen25), rows[1:])[0]
    total = len(failed.prompt_ids) + len(failed.response_ids)
    assert failed.routed_experts.shape == (total, 3, 2) and not failed.routed_experts.any()
    batch = verl_batch(config, qwen25, [ok, failed], rows)  # verl concatenates every output's array
    assert batch.batch["routed_experts"].shape[0] == 2


@pytest.mark.parametrize(
    ("spec", "status", "cause"),
    [
        ("env_raise:1", "failed", "InjectedFaultError"),
        ("reward_raise:1", "failed", "reward failed"),
        ("env_hang=3:1", "failed", "timed out"),
    ],
)
def test_an_env_fault_gives_an_untrained_output_and_nothing_raises(
    tmp_path, tau2_backend, qwen25, oracle_server, spec, status, cause
):
    """Installed env faults (``tools/faults/env.py``) under verl's loop: a FAILED output, never an exception."""
    from slime_tau_plugin.tools.faults.env import install_env_faults
    from slime_tau_plugin.tools.faults.spec import FaultSpec

    install_env_faults(FaultSpec.parse(spec))
    try:
        config = verl_config("+tau.env_timeout_s=1.5", "+tau.env_workers=3")  # resources keyed by the wrapper
        rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))
        out = run_rows(lambda: make_loop(config, HTTPServerManager(oracle_server.url), qwen25), rows)[0]
    finally:
        install_env_faults(None)
    assert_output_invariants(out, config)
    assert out.extra_fields["status"] == status and cause in out.extra_fields["error"], out.extra_fields["error"]


def test_an_episode_past_its_deadline_is_truncated_and_untrained(tmp_path, tau2_backend, qwen25, oracle_server):
    config = verl_config("+tau.episode_timeout_s=0.001")
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 1))
    out = run_rows(lambda: make_loop(config, HTTPServerManager(oracle_server.url), qwen25), rows)[0]
    assert_output_invariants(out, config)
    assert out.extra_fields["termination_reason"] == "deadline" and out.extra_fields["status"] == "truncated"
    assert out.reward_score == 0.0 and sum(out.response_mask) == 0
