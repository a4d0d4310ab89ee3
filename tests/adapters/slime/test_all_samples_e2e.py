"""Real episodes through the run-level hooks: ``generate`` over real HTTP and τ², then ``keep_group``,
``post_process_rewards``, ``process_all_samples`` and the kept-only ``metrics.log_rollout``.

Episodes: the oracle policy (reward 1), a policy that only chats (reward 0, COMPLETED) and an LLM user on a
closed port (FAILED, ``user_error``). The one fake replaces slime's logging module (an external seam, as in
``tests/adapters/slime/test_metrics.py``); the filter, guard, advantages and metrics are the real ones.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from slime_tau_plugin.adapters.slime.advantages import post_process_rewards
from slime_tau_plugin.adapters.slime.all_samples import ALL_PREFIX, process_all_samples
from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.adapters.slime.group_filter import FailureGuardError, keep_group, reset_guard
from slime_tau_plugin.adapters.slime.metrics import ROLLOUT_PREFIX, log_rollout
from slime_tau_plugin.tools.servers.fake_models import ScriptedModel
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, slime_args
from tests.adapters.slime.test_metrics import install_fake_slime_log
from tests.contracts.slime_sample import Sample

DOMAIN = f"{ALL_PREFIX}tau2/retail/"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def players(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, serve):
    """slime args for each kind of episode: ``pass`` (oracle), ``fail`` (chats only), ``dead`` (user down)."""
    oracle = oracle_server_factory(qwen25, (("retail", "train"),))
    chatty = serve(ScriptedModel(qwen25, ["Let me look into that for you."]))
    dead_user = dict(tau_user="llm", tau_user_base_url=f"http://127.0.0.1:{closed_port()}/v1")
    common = dict(tau_domain="retail", tau_split="train", n_samples_per_prompt=2, rollout_batch_size=4)
    return {
        "pass": slime_args(oracle, qwen25_dir, **common),
        "fail": slime_args(chatty, qwen25_dir, **common),
        "dead": slime_args(oracle, qwen25_dir, tau_user_model="m", tau_user_retries=1, **dead_user, **common),
    }


def play(tau2_backend, players, plan: list[tuple[str, str]]) -> list[list[Sample]]:
    """Groups of two episodes of one task each, played as ``plan`` says, concurrently."""
    samples = make_samples(tau2_backend, "retail", "train", len(plan))
    pairs = [[s, Sample(prompt=s.prompt, metadata=dict(s.metadata), session_id=f"{s.session_id}-b")] for s in samples]

    async def run_all() -> None:
        calls = [
            generate(players[kind], sample, dict(SAMPLING))
            for pair, kinds in zip(pairs, plan, strict=True)
            for sample, kind in zip(pair, kinds, strict=True)
        ]
        await asyncio.gather(*calls)

    asyncio.run(run_all())
    return pairs


def test_all_groups_are_logged_next_to_the_kept_ones(tau2_backend, players, monkeypatch):
    reset_guard()
    logged = install_fake_slime_log(monkeypatch)
    plan = [("pass", "pass"), ("dead", "dead"), ("pass", "fail"), ("pass", "dead")]
    groups = play(tau2_backend, players, plan)
    assert [[s.status.name for s in g] for g in groups][1] == ["FAILED", "FAILED"]
    assert groups[1][0].metadata["termination_reason"] == "user_error"
    args = players["pass"]
    verdicts = [keep_group(args, g) for g in groups]
    assert [(v.keep, v.reason) for v in verdicts] == [
        (False, "zero_std_1.0"),
        (False, "failed_user"),
        (True, None),
        (False, "zero_std_1.0"),  # slime's filter keeps it: the FAILED episode's 0 is its only spread
    ]
    kept = [g for g, v in zip(groups, verdicts, strict=True) if v.keep]

    process_all_samples(args, groups, None)
    log_rollout(0, args, kept, None, 1.0)
    everything, kept_only = logged[0]["metrics"], logged[1]["metrics"]
    assert everything[f"{DOMAIN}samples"] == 8 and kept_only[f"{ROLLOUT_PREFIX}tau2/retail/samples"] == 2
    assert everything[f"{DOMAIN}pass_rate"] == pytest.approx(4 / 8)
    assert everything[f"{DOMAIN}status/failed"] == pytest.approx(3 / 8)
    assert everything[f"{DOMAIN}failed/user"] == pytest.approx(3 / 8)
    assert kept_only[f"{ROLLOUT_PREFIX}tau2/retail/status/failed"] == 0.0  # what the old metrics showed
    assert everything[f"{ALL_PREFIX}groups/drawn"] == 4 and everything[f"{ALL_PREFIX}groups/kept"] == 1
    assert everything[f"{ALL_PREFIX}groups/dropped_zero_std_1.0"] == 2
    assert everything[f"{ALL_PREFIX}groups/dropped_failed_user"] == 1
    assert logged[0]["step_key"] == "rollout/step"

    flat = [s for g in groups for s in g]
    raw, adv = post_process_rewards(args, flat)
    assert raw == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert adv[2:4] == [0.0, 0.0] and adv[7] == 0.0 and adv[6] == 0.0  # failures, and a lone survivor
    assert adv[4] > 0 > adv[5]


def test_dead_user_simulator_stops_the_run_naming_it(tau2_backend, players):
    reset_guard()
    groups = play(tau2_backend, players, [("dead", "dead")] * 2)
    args = players["dead"]
    args.tau_failure_window_groups = 3  # 6 episodes; the guard stops at more than 3 FAILED on the user
    keep_group(args, groups[0])
    with pytest.raises(FailureGuardError, match=r"4 of the last 4 episodes \(2 groups\) FAILED on the user simulator"):
        keep_group(args, groups[1])
