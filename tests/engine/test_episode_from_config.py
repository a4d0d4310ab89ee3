"""One episode from config alone: what an episode worker does in a fresh process, and the typed config boundary.

The worker test starts the built-in oracle server here, then a new interpreter that knows only a
``TauConfig`` (as JSON) and a task: it builds the process resources (``EpisodeResources.for_config``)
and plays the task through ``engine.run_episode``. The other tests pin the resource cache's key and that
its first build leaves the event loop free, and that a ``tau_*`` value of the wrong type is a
``ConfigError`` naming the key (a quoted number is coerced).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.resources import EpisodeResources
from tests.adapters.slime.test_generate_e2e import SAMPLING, slime_args
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants

WORKER = """
import asyncio, json, sys
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.loop.run import run_episode
from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.resources import EpisodeResources

async def main(spec):
    config = TauConfig(**spec["config"])
    resources = await EpisodeResources.for_config(config)
    ref = get_backend(config.benchmark).task_refs(config.domain, config.split)[spec["position"]]
    result = await run_episode(resources, resources.policy, ref, spec["sampling"], session_id="worker-0")
    await resources.aclose()
    traj = result.trajectory
    print(json.dumps({
        "task": ref.task_id, "termination": result.termination.value, "reward": result.reward,
        "trainable": sum(traj.loss_mask), "response_length": traj.response_length, "error": result.error,
    }))

asyncio.run(main(json.loads(sys.argv[1])))
"""


def test_a_fresh_process_plays_an_episode_from_config_alone(tau2_backend, qwen25, qwen25_dir, oracle_server_factory):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    config = {
        "benchmark": "tau2",
        "domain": "retail",
        "split": "train",
        "policy_url": server.url,
        "tokenizer_path": qwen25_dir,
    }
    spec = {"config": config, "position": 1, "sampling": SAMPLING}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps(spec)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["task"] == tau2_backend.task_refs("retail", "train")[1].task_id
    assert out["termination"] == "user_stop" and out["reward"] == 1.0, out
    assert out["error"] is None and 0 < out["trainable"] < out["response_length"]


def test_resources_are_built_once_per_config_and_off_the_event_loop(tau2_backend, qwen25_dir):
    config = TauConfig(tokenizer_path=qwen25_dir, domain="airline", max_turns=7)  # a key no other test uses

    async def build_while_ticking() -> tuple[list[EpisodeResources], float]:
        gaps, stop = [], False

        async def ticker() -> None:
            last = time.perf_counter()
            while not stop:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        built = await asyncio.gather(*[EpisodeResources.for_config(config) for _ in range(3)])
        again = await EpisodeResources.for_config(TauConfig(tokenizer_path=qwen25_dir, domain="airline", max_turns=7))
        stop = True
        await tick
        return [*built, again], max(gaps)

    t0 = time.perf_counter()
    built, worst_gap = asyncio.run(build_while_ticking())
    took = time.perf_counter() - t0
    assert all(r is built[0] for r in built), "one build per config, shared by every caller"
    assert built[0].policy is None and built[0].tokenizer is not None, "no policy URL: a front door injects one"
    assert worst_gap < max(0.25, took / 2), f"the event loop stalled {worst_gap:.2f}s of a {took:.2f}s build"


def test_a_quoted_number_is_coerced_and_a_word_is_refused_naming_the_key(tau2_backend, qwen25, qwen25_dir, serve):
    assert config_from_args(SimpleNamespace(tau_max_turns="30")).max_turns == 30
    with pytest.raises(ConfigError, match=r"tau_env_workers='eight' is invalid; expected an integer"):
        config_from_args(SimpleNamespace(tau_env_workers="eight"))
    with pytest.raises(ConfigError, match=r"tau_max_context_len='lots' is invalid; expected an integer"):
        config_from_args(SimpleNamespace(tau_max_context_len="lots", rollout_max_context_len=4096))
    from slime_tau_plugin.tools.servers.fake_models import ScriptedModel

    server = serve(ScriptedModel(qwen25, ["Hello, how can I help?"]))
    sample = Sample(prompt=0, session_id="quoted")
    asyncio.run(generate(slime_args(server, qwen25_dir, tau_max_turns="30"), sample, dict(SAMPLING)))
    assert_sample_invariants(sample)
    with pytest.raises(ConfigError, match="tau_env_workers='eight'"):
        asyncio.run(generate(slime_args(server, qwen25_dir, tau_env_workers="eight"), Sample(prompt=0), SAMPLING))
