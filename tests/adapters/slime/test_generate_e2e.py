"""End to end through slime's entry point: real HTTP, our oracle server, real τ² environments.

Several episodes run concurrently through ``generate`` with a Sample stand-in that enforces slime's
``append_response_tokens`` rules; every invariant of docs/ARCHITECTURE.md is asserted on every sample.
"""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.data import task_row
from tests.contracts.slime_sample import PlainSample, Sample
from tests.invariants import assert_sample_invariants, assert_tito
from tests.slime_args import slime_args

SAMPLING = {
    "temperature": 1.0,
    "top_p": 1.0,
    "max_new_tokens": 2048,
    "no_stop_trim": True,
    "skip_special_tokens": False,
}


_batches = itertools.count()


def make_samples(backend, domain: str, split: str, count: int, cls=Sample) -> list:
    """Samples of the first ``count`` tasks; session ids are unique in the test session, because
    :func:`requests_of` selects a sample's requests by them on servers that tests share."""
    refs = backend.task_refs(domain, split)[:count]
    batch = next(_batches)
    samples = []
    for i, ref in enumerate(refs):
        row = task_row(i, ref)
        session_id = f"{domain}-{split}-{i}-b{batch}"
        samples.append(cls(prompt=row["index"], metadata=row["metadata"], session_id=session_id))
    return samples


def requests_of(server, sample) -> list[dict]:
    prefix = f"{sample.session_id}-"
    mine = [r for r in server.requests if str(r.get("rid", "")).startswith(prefix)]
    return sorted(mine, key=lambda r: int(r["rid"].rsplit("-", 1)[1]))


async def run_all(args, samples):
    return await asyncio.gather(*[generate(args, s, SAMPLING) for s in samples])


@pytest.mark.parametrize(("domain", "split", "count"), [("retail", "train", 6), ("airline", "test", 3)])
def test_oracle_reaches_reward_one_with_exact_tokens(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, domain, split, count
):
    server = oracle_server_factory(qwen25, ((domain, split),))
    args = slime_args(server, qwen25_dir, tau_domain=domain, tau_split=split)
    samples = make_samples(tau2_backend, domain, split, count)
    returned = asyncio.run(run_all(args, samples))
    for sample, out in zip(samples, returned, strict=True):
        assert out is sample, "generate must fill and return the Sample slime passed in"
        assert_sample_invariants(sample)
        assert_tito(sample, requests_of(server, sample))
        assert sample.status is Sample.Status.COMPLETED, sample.metadata
        assert sample.reward == 1.0, sample.metadata.get("reward_info")
        assert sample.metadata["tau_package"] and sample.metadata["tool_calls"] >= 1
        assert sample.weight_versions == ["default"] * sample.metadata["num_turns"]
        # Template fidelity (Qwen2.5 does not rewrite history): the held ids are the template's own ids.
        full = qwen25.apply_chat_template(sample.metadata["messages"], tools=sample.metadata["tools"], tokenize=False)
        full_ids = qwen25.encode(full, add_special_tokens=False)
        assert full_ids[: len(sample.tokens)] == sample.tokens
        assert qwen25.decode(full_ids[len(sample.tokens) :]) == "\n"


def test_qwen3_differs_from_full_render_only_in_think_blocks(tau2_backend, qwen3, qwen3_dir, oracle_server_factory):
    server = oracle_server_factory(qwen3, (("retail", "train"),))
    args = slime_args(server, qwen3_dir, tau_domain="retail", tau_split="train")
    samples = make_samples(tau2_backend, "retail", "train", 2)
    asyncio.run(run_all(args, samples))
    think = re.compile(r"<think>.*?</think>\s*", re.S)
    for sample in samples:
        assert_sample_invariants(sample)
        assert_tito(sample, requests_of(server, sample))
        assert sample.reward == 1.0
        held = qwen3.decode(sample.tokens)
        full = qwen3.apply_chat_template(sample.metadata["messages"], tools=sample.metadata["tools"], tokenize=False)
        assert held != full.rstrip("\n"), "Qwen3 renders the last assistant turn with an empty think block"
        assert think.sub("", held) == think.sub("", full).rstrip("\n")


def test_sample_without_append_response_tokens_gets_the_same_fields(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    args = slime_args(server, qwen25_dir, tau_domain="retail", tau_split="train")
    rich = make_samples(tau2_backend, "retail", "train", 1)[0]
    plain = make_samples(tau2_backend, "retail", "train", 1, cls=PlainSample)[0]
    plain.session_id = "plain-0"
    asyncio.run(run_all(args, [rich, plain]))
    assert_sample_invariants(plain)
    assert plain.tokens == rich.tokens and plain.loss_mask == rich.loss_mask
    assert plain.rollout_log_probs == rich.rollout_log_probs and plain.reward == rich.reward == 1.0


def test_a_sample_of_another_benchmark_is_refused_naming_the_key(qwen25, qwen25_dir, oracle_server_factory):
    """Data prepared for τ-bench v1 under a τ² config would play τ²'s task of the same id: refused, not played."""
    pytest.importorskip("tau_bench")
    from slime_tau_plugin.engine.errors import ConfigError

    server = oracle_server_factory(qwen25, (("retail", "train"),))
    metadata = {"benchmark": "tau1", "domain": "retail", "split": "test", "task_index": 0}
    sample = Sample(prompt=0, metadata=metadata, session_id="other-benchmark")
    with pytest.raises(ConfigError) as info:
        asyncio.run(generate(slime_args(server, qwen25_dir), sample, SAMPLING))
    message = str(info.value)
    assert "tau_benchmark is tau2" in message and "tau1 task" in message and "\n" not in message
