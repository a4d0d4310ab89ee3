"""Suspend and resume: an episode stopped at any turn boundary, or mid-generation, goes on from its state alone.

Every oracle episode of the first tasks of τ² retail, airline, telecom (the user runs device tools) and
τ-bench v1 retail is played once uninterrupted, then suspended at every turn boundary and cut once in every
turn mid-generation (the server answers ``finish_reason: abort`` with half of the turn's ids). Each state goes
through JSON and is resumed on fresh environments (its action log replayed and checked); the resumed episode
must equal the uninterrupted one: ids, log-probs, mask, reward, termination and the final database hash. A
fresh interpreter resumes states from a file. A tampered state is refused, naming what it broke.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.errors import ResumeError
from slime_tau_plugin.engine.loop.run import run_episode
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.tools.servers import oracle_scripts
from slime_tau_plugin.tools.servers.fake_models import OracleModel
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

SAMPLING = {"temperature": 1.0, "max_new_tokens": 2048}
SETS = {
    "tau2-retail": ("tau2", "retail", "train"),
    "tau2-airline": ("tau2", "airline", "test"),
    "tau2-telecom": ("tau2", "telecom", "train"),
    "tau1-retail": ("tau1", "retail", "test"),
}
TASKS_PER_SET = 2


class CuttableOracle(OracleModel):
    """The oracle, whose next generation can be cut (the server then answers ``abort`` with half its ids)."""

    cut_next = False

    def generate(self, input_ids, sampling_params):
        out = super().generate(input_ids, sampling_params)
        if self.cut_next:
            self.cut_next = False
            return dataclasses.replace(out, abort=True)
        return out


class Sessions:
    """A τ backend that remembers the sessions it opened (to hash the database an episode ends with)."""

    def __init__(self, backend) -> None:
        self.backend, self.opened = backend, []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def open(self, ref, options=None):
        session = self.backend.open(ref, options)
        self.opened.append(session)
        return session


def _installed(name: str) -> bool:
    if SETS[name][0] == "tau1":
        try:
            import tau_bench  # noqa: F401
        except ImportError:
            return False
    return True


@pytest.fixture(scope="module")
def cut_server(qwen25, tau2_backend):
    model = CuttableOracle(qwen25, oracle_scripts([s for n, s in SETS.items() if _installed(n)]))
    server = SGLangServer(model).start()
    yield server, model
    server.stop()


def _abort_at(turn: int, model: CuttableOracle | None):
    """An abort check that stops before turn ``turn`` (or, with ``model``, cuts that turn's generation)."""
    asked = {"n": 0}

    def check() -> bool:
        asked["n"] += 1
        if asked["n"] == turn + 1:
            if model is None:
                return True
            model.cut_next = True
        return False

    return check


def _view(result, hash_: str) -> dict:
    traj = result.trajectory
    return {
        "ids": traj.ids,
        "log_probs": traj.rollout_log_probs,
        "mask": traj.loss_mask,
        "reward": result.reward,
        "termination": result.termination.value,
        "num_turns": result.num_turns,
        "hash": hash_,
    }


@pytest.mark.parametrize("name", list(SETS))
def test_every_suspension_resumes_to_the_uninterrupted_episode(name, cut_server, qwen25_dir):
    if not _installed(name):
        pytest.importorskip("tau_bench")
    benchmark, domain, split = SETS[name]
    server, model = cut_server
    sessions = Sessions(get_backend(benchmark))
    config = TauConfig(
        benchmark=benchmark, domain=domain, split=split, policy_url=server.url, tokenizer_path=qwen25_dir
    )

    async def play(ref, **kwargs):
        result = await run_episode(resources, resources.policy, ref, dict(SAMPLING), **kwargs)
        return result, sessions.opened[-1].state_hash()

    async def main() -> int:
        checked = 0
        for ref in sessions.task_refs(domain, split)[:TASKS_PER_SET]:
            full, full_hash = await play(ref)
            assert full.termination is TerminationReason.USER_STOP and full.reward == 1.0, full.error
            want = _view(full, full_hash)
            for turn in range(full.num_turns):
                for cut in (None, model):
                    part, _ = await play(ref, should_abort=_abort_at(turn, cut), suspend=True)
                    assert part.termination is TerminationReason.ABORTED and part.state is not None
                    state = EpisodeState.from_json(json.dumps(part.state.to_json()))
                    assert (state.open_turn_ids > 0) == (cut is not None), (turn, state.open_turn_ids)
                    done, done_hash = await play(ref, resume=state)
                    where = f"{ref} suspended before turn {turn}" + (" mid-generation" if cut else "")
                    assert _view(done, done_hash) == want, where
                    assert done.net_info["tau_suspensions"] == 1 and done.net_info["tau_turns_reused"] == part.num_turns
                    checked += 1
        return checked

    resources = EpisodeResources.build(config, backend=sessions)
    try:
        checked = asyncio.run(main())
    finally:
        asyncio.run(resources.aclose())
    assert checked >= 2 * TASKS_PER_SET * 2


RESUMER = """
import asyncio, json, sys
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.loop.run import run_episode

async def main(spec):
    out = []
    for item in spec["states"]:
        config = TauConfig(**item["config"])
        resources = await EpisodeResources.for_config(config)
        state = EpisodeState.from_json(item["state"])
        result = await run_episode(resources, resources.policy, state.task_ref, {"max_new_tokens": 2048}, resume=state)
        traj = result.trajectory
        out.append({"ids": traj.ids, "log_probs": traj.rollout_log_probs, "mask": traj.loss_mask,
                    "reward": result.reward, "termination": result.termination.value, "error": result.error})
        await resources.aclose()
    print(json.dumps(out))

asyncio.run(main(json.load(open(sys.argv[1]))))
"""


def test_a_fresh_process_resumes_from_the_state_alone(cut_server, qwen25_dir, tmp_path: Path):
    server, model = cut_server
    items, wanted = [], []

    async def suspend_one(name: str, turn: int, cut: bool) -> None:
        benchmark, domain, split = SETS[name]
        config = TauConfig(
            benchmark=benchmark, domain=domain, split=split, policy_url=server.url, tokenizer_path=qwen25_dir
        )
        resources = await EpisodeResources.for_config(config)
        ref = get_backend(benchmark).task_refs(domain, split)[1]
        full = await run_episode(resources, resources.policy, ref, dict(SAMPLING))
        check = _abort_at(turn, model if cut else None)
        part = await run_episode(resources, resources.policy, ref, dict(SAMPLING), should_abort=check, suspend=True)
        items.append({"config": config.model_dump(mode="json"), "state": json.dumps(part.state.to_json())})
        traj = full.trajectory
        wanted.append(
            {"ids": traj.ids, "log_probs": traj.rollout_log_probs, "mask": traj.loss_mask, "reward": full.reward}
        )

    async def main() -> None:
        for name, turn, cut in [("tau2-retail", 2, False), ("tau2-airline", 1, True), ("tau2-telecom", 1, False)]:
            await suspend_one(name, turn, cut)
        if _installed("tau1-retail"):
            await suspend_one("tau1-retail", 3, True)

    asyncio.run(main())
    spec = tmp_path / "states.json"
    spec.write_text(json.dumps({"states": items}))
    done = subprocess.run(
        [sys.executable, "-c", RESUMER, str(spec)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for got, want in zip(results, wanted, strict=True):
        assert got["error"] is None and got["termination"] == "user_stop", got["error"]
        assert {k: got[k] for k in want} == want


def _suspended(server, model, qwen25_dir) -> tuple[EpisodeResources, object, EpisodeState]:
    config = TauConfig(domain="retail", split="train", policy_url=server.url, tokenizer_path=qwen25_dir)

    async def main():
        resources = await EpisodeResources.for_config(config)
        ref = get_backend("tau2").task_refs("retail", "train")[0]
        part = await run_episode(resources, resources.policy, ref, dict(SAMPLING), should_abort=_abort_at(3, None))
        assert part.state is None, "no state unless the caller asks to suspend"
        part = await run_episode(
            resources, resources.policy, ref, dict(SAMPLING), should_abort=_abort_at(3, None), suspend=True
        )
        return resources, ref, part.state

    return asyncio.run(main())


def _resume(resources, state: EpisodeState):
    return asyncio.run(run_episode(resources, resources.policy, state.task_ref, dict(SAMPLING), resume=state))


def test_a_tampered_state_fails_naming_what_differs(cut_server, qwen25_dir):
    server, model = cut_server
    resources, _, state = _suspended(server, model, qwen25_dir)
    data = state.to_json()
    tool_calls = [i for i, a in enumerate(data["actions"]) if a["kind"] == "agent"]
    assert tool_calls, "the suspended episode made tool calls"

    changed = json.loads(json.dumps(data))
    changed["actions"][tool_calls[0]]["content"] = "a different answer"
    result = _resume(resources, EpisodeState.from_json(changed))
    assert result.termination is TerminationReason.ENV_ERROR
    assert "resume: replaying call" in result.error and "different answer" in result.error

    changed = json.loads(json.dumps(data))
    changed["actions"][tool_calls[-1]]["arguments"] = {"order_id": "#W0000000"}
    result = _resume(resources, EpisodeState.from_json(changed))
    assert result.termination is TerminationReason.ENV_ERROR and "resume:" in result.error

    changed = dict(data, env_hash="0" * 64)
    result = _resume(resources, EpisodeState.from_json(changed))
    assert result.termination is TerminationReason.ENV_ERROR and "database hash" in result.error

    changed = dict(data, prompt_ids=[1, 2, 3])
    result = _resume(resources, EpisodeState.from_json(changed))
    assert result.termination is TerminationReason.ENV_ERROR and "prompt ids" in result.error

    assert _resume(resources, EpisodeState.from_json(data)).reward == 1.0, "the untampered state still resumes"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "version 2"),
        ({"num_turns": -1}, "tau_episode_state.num_turns"),
        ({"segments": [{"ids": [1], "log_probs": [0.0], "trainable": "maybe"}]}, "segments.0.trainable"),
        ({"surprise": 1}, "tau_episode_state.surprise"),
    ],
)
def test_a_malformed_state_is_refused_naming_the_field(change, message):
    data = {
        "version": 1,
        "benchmark": "tau2",
        "domain": "retail",
        "split": "train",
        "task_id": "0",
        "prompt_ids": [1, 2],
        "messages": [],
        "num_turns": 0,
        "env_hash": "h",
        "template_mode": "anchored",
    }
    EpisodeState.from_json(data)  # the base is valid
    with pytest.raises(ResumeError, match=message.replace(".", r"\.")):
        EpisodeState.from_json({**data, **change})
    with pytest.raises(ResumeError, match="not JSON"):
        EpisodeState.from_json("{truncated")
