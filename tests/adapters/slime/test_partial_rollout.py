"""slime's partial rollout through ``generate``: an aborted sample keeps its state and resumes when handed back.

slime's end-of-step ``abort`` aborts every request on the engines (our server answers ``finish_reason: abort``
with the ids it had), collects the groups still in flight into its buffer, and next step calls ``generate``
again on the same ``Sample`` (after zeroing its earlier mask under ``--mask-offpolicy-in-partial-rollout``).
Here that is done by hand on real HTTP: the resumed sample must equal the uninterrupted one; without
``--partial-rollout`` a handed-back sample restarts clean; a sample whose tokens changed FAILS naming it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.adapters.slime.partial import abort_tally
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.episode.state import METADATA_KEY
from slime_tau_plugin.tools.servers import oracle_scripts
from slime_tau_plugin.tools.servers.fake_models import OracleModel
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants
from tests.slime_args import slime_args

SAMPLING = {"temperature": 1.0, "max_new_tokens": 2048, "no_stop_trim": True, "skip_special_tokens": False}


@pytest.fixture(scope="module")
def slow_oracle(qwen25, tau2_backend):
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    server = SGLangServer(OracleModel(qwen25, oracle_scripts([("tau2", "retail", "train")])), latency_s=0.3).start()
    yield server
    server.stop()


def _sample(backend, position: int, tag: str) -> Sample:
    row = task_row(position, backend.task_refs("retail", "train")[position])
    return Sample(index=position, prompt=row["index"], metadata=row["metadata"], session_id=f"partial-{tag}")


def _aborted_after(server, args, sample, seconds: float) -> Sample:
    """Run generate and abort every in-flight request after ``seconds`` (slime's end-of-step abort)."""

    async def main():
        task = asyncio.create_task(generate(args, sample, dict(SAMPLING)))
        await asyncio.sleep(seconds)
        while not task.done():
            server.abort(abort_all=True)
            await asyncio.sleep(0.05)
        return await task

    return asyncio.run(main())


def _uninterrupted(server, qwen25_dir, backend, position: int) -> Sample:
    sample = _sample(backend, position, f"whole-{position}")
    asyncio.run(generate(slime_args(server, qwen25_dir), sample, dict(SAMPLING)))
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0
    return sample


@pytest.mark.parametrize("mask_offpolicy", [False, True])
def test_an_aborted_sample_resumes_to_the_uninterrupted_one(slow_oracle, qwen25_dir, tau2_backend, mask_offpolicy):
    whole = _uninterrupted(slow_oracle, qwen25_dir, tau2_backend, 0)
    args = slime_args(slow_oracle, qwen25_dir, partial_rollout=True)
    abort_tally().take()
    sample = _aborted_after(slow_oracle, args, _sample(tau2_backend, 0, f"cut-{mask_offpolicy}"), 1.0)
    assert sample.status is Sample.Status.ABORTED and METADATA_KEY in sample.metadata
    assert abort_tally().take()["partial/aborted_suspended"] == 1.0
    held, turns = sample.response_length, sample.metadata["num_turns"]
    assert 0 < held and 1 <= turns < whole.metadata["num_turns"]
    assert sample.loss_mask.count(1) > 0, "a suspended sample keeps its trainable ids"

    sample.metadata["start_rollout_id"] = 0  # what slime's abort() records
    if mask_offpolicy:  # slime's generate_and_rm, before it calls generate again
        sample.loss_mask = [0] * sample.response_length
    asyncio.run(generate(args, sample, dict(SAMPLING)))

    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0, sample.metadata.get("error")
    assert sample.tokens == whole.tokens
    want = [0] * held + whole.loss_mask[held:] if mask_offpolicy else whole.loss_mask
    assert sample.loss_mask == want
    assert sample.rollout_log_probs == [lp if m else 0.0 for lp, m in zip(whole.rollout_log_probs, want, strict=True)]
    assert sample.metadata["tau_suspensions"] == 1 and sample.metadata["tau_turns_reused"] == turns
    assert METADATA_KEY not in sample.metadata, "a finished sample carries no state"
    cut = sample.metadata["tau_weight_versions"]  # one per generation: a turn cut mid-generation has two
    assert sample.weight_versions == cut and len(cut) - len(whole.weight_versions) in (0, 1)


def test_without_partial_rollout_a_handed_back_sample_restarts_clean(slow_oracle, qwen25_dir, tau2_backend):
    whole = _uninterrupted(slow_oracle, qwen25_dir, tau2_backend, 1)
    args = slime_args(slow_oracle, qwen25_dir)  # partial_rollout=False
    abort_tally().take()
    sample = _aborted_after(slow_oracle, args, _sample(tau2_backend, 1, "restart"), 1.0)
    assert sample.status is Sample.Status.ABORTED and METADATA_KEY not in sample.metadata
    tally = abort_tally().take()
    assert tally["partial/aborted_thrown_away"] == 1.0 and tally["partial/aborted_thrown_away_turns"] >= 1
    asyncio.run(generate(args, sample, dict(SAMPLING)))  # slime's fully-async worker hands ABORTED groups back
    assert sample.status is Sample.Status.COMPLETED and sample.tokens == whole.tokens
    assert sample.loss_mask == whole.loss_mask and sample.metadata["tau_suspensions"] == 0


@pytest.mark.serial  # asserts the changed sample fails within 60 s of wall clock
def test_a_sample_whose_tokens_changed_fails_naming_it(slow_oracle, qwen25_dir, tau2_backend):
    args = slime_args(slow_oracle, qwen25_dir, partial_rollout=True)
    sample = _aborted_after(slow_oracle, args, _sample(tau2_backend, 2, "changed"), 1.0)
    assert sample.status is Sample.Status.ABORTED
    sample.tokens = sample.tokens[:-1]
    sample.response_length -= 1
    sample.loss_mask, sample.rollout_log_probs = sample.loss_mask[:-1], sample.rollout_log_probs[:-1]
    t0 = time.monotonic()
    asyncio.run(generate(args, sample, dict(SAMPLING)))
    assert time.monotonic() - t0 < 60
    assert sample.status is Sample.Status.FAILED and sample.remove_sample
    assert "resume: the sample holds" in sample.metadata["error"]
    assert METADATA_KEY not in sample.metadata


def test_turns_older_than_the_weight_lag_bound_are_masked(slow_oracle, qwen25_dir, tau2_backend):
    """A weight update between the abort and the resume (slime's fully-async worker hands such groups back):
    with ``tau_max_weight_lag: 0`` the turns the old weights sampled train on nothing; the new ones do."""
    args = slime_args(slow_oracle, qwen25_dir, partial_rollout=True, tau_max_weight_lag=0)
    slow_oracle.weight_version = "1"
    try:
        sample = _aborted_after(slow_oracle, args, _sample(tau2_backend, 3, "lag"), 1.0)
        assert sample.status is Sample.Status.ABORTED
        held = sample.response_length
        slow_oracle.weight_version = "2"
        asyncio.run(generate(args, sample, dict(SAMPLING)))
    finally:
        slow_oracle.weight_version = "default"
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0
    versions = sample.metadata["tau_weight_versions"]
    assert versions[0] == "1" and versions[-1] == "2"
    assert sum(sample.loss_mask[:held]) == 0 and sum(sample.loss_mask[held:]) > 0
    assert sample.metadata["tau_offpolicy_tokens"] > 0
