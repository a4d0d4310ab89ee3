"""Episodes in worker processes and Ray actors (``tau_episode_workers``) give the samples in-process mode gives.

Through slime's entry point on real HTTP against our oracle server: the same tokens, masks, log-probs, rewards
and statuses as in the trainer's process; slime's abort reaches an episode in a worker within one turn, and a
suspended episode crosses the process boundary both ways; a worker killed mid-step costs only its own episodes
a replay (they still complete, equal to the in-process ones) and is replaced.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.adapters.slime.metrics import worker_metrics
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.episode.state import METADATA_KEY
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.workers.registry import close_pools, pool_for
from slime_tau_plugin.tools.servers import oracle_scripts
from slime_tau_plugin.tools.servers.fake_models import OracleModel
from tests.adapters.slime.test_slime_conventions import slime_rollout_module  # noqa: F401 (a fixture)
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants
from tests.slime_args import slime_args

SAMPLING = {"temperature": 1.0, "max_new_tokens": 2048, "no_stop_trim": True, "skip_special_tokens": False}
FIELDS = ("tokens", "loss_mask", "rollout_log_probs", "reward", "status", "response", "weight_versions")


@pytest.fixture(scope="module")
def slow_oracle(qwen25, tau2_backend):
    """Every generation takes 0.2 s, so episodes are in flight long enough to abort or lose a worker under."""
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    server = SGLangServer(OracleModel(qwen25, oracle_scripts([("tau2", "retail", "train")])), latency_s=0.2).start()
    yield server
    server.stop()
    close_pools()


def _samples(backend, count: int, tag: str) -> list[Sample]:
    refs = backend.task_refs("retail", "train")[:count]
    rows = [task_row(i, ref) for i, ref in enumerate(refs)]
    return [
        Sample(index=i, prompt=r["index"], metadata=r["metadata"], session_id=f"wk-{tag}-{i}")
        for i, r in enumerate(rows)
    ]


def _play(args, samples) -> None:
    async def main():
        await asyncio.gather(*[generate(args, s, dict(SAMPLING)) for s in samples])

    asyncio.run(main())


def _session_requests(server, sample) -> int:
    return sum(1 for r in server.requests if str(r.get("rid", "")).startswith(f"{sample.session_id}-"))


@pytest.fixture(scope="module")
def in_process(slow_oracle, qwen25_dir, tau2_backend) -> list[Sample]:
    samples = _samples(tau2_backend, 4, "inproc")
    _play(slime_args(slow_oracle, qwen25_dir), samples)
    assert [(s.status, s.reward) for s in samples] == [(Sample.Status.COMPLETED, 1.0)] * 4
    assert all("tau_worker" not in s.metadata for s in samples)
    return samples


def _assert_same(got: list[Sample], want: list[Sample]) -> None:
    for a, b in zip(got, want, strict=True):
        assert_sample_invariants(a)
        for name in FIELDS:
            assert getattr(a, name) == getattr(b, name), f"{name} differs for task {a.metadata['task_id']}"
        assert a.metadata["num_turns"] == b.metadata["num_turns"]


def test_worker_processes_give_the_in_process_samples(slow_oracle, qwen25_dir, tau2_backend, in_process):
    samples = _samples(tau2_backend, 4, "proc")
    _play(slime_args(slow_oracle, qwen25_dir, tau_episode_workers=2), samples)
    _assert_same(samples, in_process)
    workers = {s.metadata["tau_worker"].split(" pid ")[0] for s in samples}
    assert workers == {"process-worker-0", "process-worker-1"}, "requests go to the worker with fewer in flight"
    assert all(int(s.metadata["tau_worker"].split(" pid ")[1].split()[0]) != os.getpid() for s in samples)


def test_a_killed_worker_costs_only_its_own_episodes_a_replay(slow_oracle, qwen25_dir, tau2_backend, in_process):
    args = slime_args(slow_oracle, qwen25_dir, tau_episode_workers=2)
    samples = _samples(tau2_backend, 4, "kill")

    async def main():
        pool = await pool_for(config_from_args(args))
        tasks = [asyncio.create_task(generate(args, s, dict(SAMPLING))) for s in samples]
        while not all(_session_requests(slow_oracle, s) >= 2 for s in samples):
            await asyncio.sleep(0.05)
        victim = pool.slots[0]
        held = set(victim.pending)
        os.kill(victim.process.pid, signal.SIGKILL)
        await asyncio.gather(*tasks)
        return pool, victim, held

    pool, victim, held = asyncio.run(main())
    _assert_same(samples, in_process)
    lost = [s for s in samples if s.metadata.get("tau_worker_lost")]
    assert len(lost) == len(held) == 2, "only the dead worker's episodes were played again"
    assert all(s.metadata["tau_worker_lost"][0].startswith(f"{victim.name}: pid ") for s in lost)
    assert all(s.metadata["tau_worker_lost"][0].endswith("code -9") for s in lost)
    assert pool.replaced == 1 and pool.slots[0] is not victim and pool.slots[0].process.poll() is None
    assert worker_metrics([s.metadata for s in samples]) == {"workers/count": 2.0, "workers/replayed": 0.5}


def test_slimes_abort_reaches_a_worker_within_one_turn_and_the_state_crosses_back(
    slow_oracle,
    qwen25_dir,
    tau2_backend,
    in_process,
    slime_rollout_module,  # noqa: F811
):
    args = slime_args(slow_oracle, qwen25_dir, tau_episode_workers=2, partial_rollout=True)
    (sample,) = _samples(tau2_backend, 1, "abort")

    async def main():
        task = asyncio.create_task(generate(args, sample, dict(SAMPLING)))
        while _session_requests(slow_oracle, sample) < 2:
            await asyncio.sleep(0.02)
        slime_rollout_module(args).aborted = True  # slime's GenerateState: no engine abort, the flag alone
        seen = _session_requests(slow_oracle, sample)
        await task
        return seen

    seen = asyncio.run(main())
    assert sample.status is Sample.Status.ABORTED and METADATA_KEY in sample.metadata
    assert sample.metadata["num_turns"] <= seen + 1, "the episode stopped within one turn of the abort"
    assert sample.metadata["num_turns"] < in_process[0].metadata["num_turns"]

    slime_rollout_module(args).aborted = False  # the next step hands the sample back
    asyncio.run(generate(args, sample, dict(SAMPLING)))
    _assert_same([sample], in_process[:1])
    assert sample.metadata["tau_suspensions"] == 1 and METADATA_KEY not in sample.metadata


def test_local_ray_actors_give_the_in_process_samples(slow_oracle, qwen25_dir, tau2_backend, in_process):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024, logging_level="WARNING")
    try:
        args = slime_args(
            slow_oracle, qwen25_dir, tau_episode_workers=2, tau_episode_worker_kind="ray", tau_episode_worker_cpus=0.5
        )
        samples = _samples(tau2_backend, 4, "ray")
        _play(args, samples)
        _assert_same(samples, in_process)
        assert {s.metadata["tau_worker"].split(" pid ")[0] for s in samples} == {"ray-worker-0", "ray-worker-1"}
    finally:
        close_pools()
        ray.shutdown()


def test_a_config_error_in_a_worker_is_raised_in_slimes_process(slow_oracle, tmp_path, tau2_backend):
    args = slime_args(slow_oracle, str(tmp_path), tau_episode_workers=1)  # a tokenizer folder that holds none
    (sample,) = _samples(tau2_backend, 1, "config")
    with pytest.raises(ConfigError, match=str(tmp_path)):
        _play(args, [sample])


def test_workers_that_cannot_start_fail_the_samples_naming_why(slow_oracle, qwen25_dir, tau2_backend, monkeypatch):
    monkeypatch.setenv("PYTHONHOME", "/nonexistent")  # every worker's interpreter dies before it answers
    args = slime_args(slow_oracle, qwen25_dir, tau_episode_workers=1, tau_max_turns=29)  # a pool of its own
    samples = _samples(tau2_backend, 3, "broken")
    _play(args, samples[:2])
    for sample in samples[:2]:
        assert sample.status is Sample.Status.FAILED and sample.metadata["failed_endpoint"] == "worker"
        assert "exited with code 1" in sample.metadata["error"], sample.metadata["error"]
    pool = asyncio.run(pool_for(config_from_args(args)))
    deadline = time.monotonic() + 60
    while pool.broken is None and time.monotonic() < deadline:  # the third silent death stops the replacing
        time.sleep(0.1)
    assert pool.broken is not None and "3 workers in a row died before answering" in pool.broken
    _play(args, samples[2:])
    assert samples[2].status is Sample.Status.FAILED and "no episode worker left" in samples[2].metadata["error"]
