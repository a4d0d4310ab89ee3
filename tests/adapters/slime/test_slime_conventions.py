"""slime's conventions, through ``generate`` over real HTTP with real τ² retail environments.

- Budgets: ``--rollout-max-response-len`` is a per-turn cap; the sequence is bounded by
  ``--rollout-max-context-len``, else ``context_parallel_size * max_tokens_per_gpu``.
- Abort: slime's ``GenerateState(args).aborted`` is noticed between turns.
- Contract: slime's minimal args (no router, no checkpoint) give a FAILED sample, not an exception.
- Typos: an unknown ``tau_*`` key raises, naming the closest valid key.

slime itself is not installed here: the abort tests register a stand-in for its rollout module
(``slime.rollout.sglang_rollout`` with a singleton ``GenerateState``), the external seam slime owns.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import types
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.adapters.slime.generate import generate, slime_abort_check
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers.fake_models import ScriptedModel, format_tool_call
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, requests_of, slime_args
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants

SLIME_TAU_EXAMPLE = dict(rollout_max_context_len=None, context_parallel_size=1, max_tokens_per_gpu=9216)
"""slime's examples/tau-bench/run_qwen3_4B.sh: no context flag, CP 1, 9216 tokens per GPU."""
GOOD_CALL = format_tool_call("find_user_id_by_email", {"email": "nobody@example.com"})


class _SingletonMeta(type):
    """slime.utils.misc.SingletonMeta: ``cls(args)`` returns the one live instance."""

    _instances: dict = {}

    def __call__(cls, *args, **kwargs):
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]


@pytest.fixture
def slime_rollout_module(monkeypatch):
    """A stand-in for slime's rollout module holding the ``GenerateState`` singleton."""

    class GenerateState(metaclass=_SingletonMeta):
        def __init__(self, args):
            self.aborted = False

    _SingletonMeta._instances.clear()
    module = types.ModuleType("slime.rollout.sglang_rollout")
    module.GenerateState = GenerateState
    monkeypatch.setitem(sys.modules, "slime.rollout.sglang_rollout", module)
    yield GenerateState
    _SingletonMeta._instances.clear()


def _play(server, tokenizer_dir, samples, **budget_args):
    args = slime_args(server, tokenizer_dir, rollout_max_response_len=1024, **budget_args)
    sampling = {**SAMPLING, "max_new_tokens": 1024}  # what slime puts there from --rollout-max-response-len

    async def run():
        return await asyncio.gather(*[generate(args, s, sampling) for s in samples])

    asyncio.run(run())
    for sample in samples:
        assert_sample_invariants(sample)
        for req in requests_of(server, sample):
            assert req["sampling_params"]["max_new_tokens"] <= 1024, "slime's response length is a per-turn cap"


def test_slime_tau_example_budgets_truncate_only_at_the_sequence_bound(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    """With slime's τ example flags the whole sequence is bounded by 1 x 9216 tokens per GPU, not by 1024."""
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    samples = make_samples(tau2_backend, "retail", "train", 6)
    _play(server, qwen25_dir, samples, **SLIME_TAU_EXAMPLE)
    for sample in samples:
        assert len(sample.tokens) <= 9216
        assert sample.response_length > 1024, "the whole response is not capped by the per-turn length"
        if sample.status is not Sample.Status.COMPLETED:  # only an episode that reached the bound may stop early
            assert sample.status is Sample.Status.TRUNCATED and len(sample.tokens) > 9216 - 1024
    assert sum(s.reward == 1.0 for s in samples) >= 3


def test_with_room_in_the_context_every_oracle_episode_completes(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    samples = make_samples(tau2_backend, "retail", "train", 6)
    _play(server, qwen25_dir, samples, rollout_max_context_len=16384)
    assert [(s.status, s.reward) for s in samples] == [(Sample.Status.COMPLETED, 1.0)] * 6


def test_budget_sources_follow_slime():
    config = config_from_args(SimpleNamespace(rollout_max_response_len=1024, **SLIME_TAU_EXAMPLE))
    assert (config.max_context_len, config.max_response_len) == (9216, None)
    config = config_from_args(SimpleNamespace(rollout_max_context_len=4096, context_parallel_size=2))
    assert config.max_context_len == 4096
    tighter = config_from_args(SimpleNamespace(tau_max_context_len=3000, **SLIME_TAU_EXAMPLE))
    assert tighter.max_context_len == 3000
    assert config_from_args(SimpleNamespace(tau_max_response_len=5000)).max_response_len == 5000
    assert config_from_args(SimpleNamespace()).max_context_len == TauConfig().max_context_len


@pytest.mark.serial  # asserts episodes return within 2 x 0.2 s of wall clock after the abort
def test_abort_between_turns_returns_within_one_turn(tau2_backend, qwen25, qwen25_dir, serve, slime_rollout_module):
    latency = 0.2
    server = serve(ScriptedModel(qwen25, [GOOD_CALL] * 100), latency_s=latency)
    samples = make_samples(tau2_backend, "retail", "train", 4)
    args = slime_args(server, qwen25_dir, tau_max_turns=100)
    state = slime_rollout_module(args)  # slime creates it before any rollout

    async def run():
        tasks = [asyncio.create_task(generate(args, s, SAMPLING)) for s in samples]
        deadline = time.perf_counter() + 30  # a cold process spends its first second loading the tokenizer
        while min(len(requests_of(server, s)) for s in samples) < 2 and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)  # every episode a turn or two in, still playing
        counts = {s.session_id: len(requests_of(server, s)) for s in samples}
        state.aborted, t_abort = True, time.perf_counter()
        await asyncio.gather(*tasks)
        return counts, time.perf_counter() - t_abort

    counts, waited = asyncio.run(run())
    assert waited < 2 * latency, f"episodes took {waited:.2f}s to return after slime's abort"
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.ABORTED
        assert sample.metadata["termination_reason"] == "aborted"
        assert counts[sample.session_id] >= 2
        assert len(requests_of(server, sample)) <= counts[sample.session_id] + 1, "at most the turn in flight"
        assert sample.reward == 0.0 and sample.metadata["reward_info"] == {}


def test_abort_check_never_creates_slime_state(slime_rollout_module):
    check = slime_abort_check(SimpleNamespace())
    assert check is not None and check() is False
    assert slime_rollout_module not in _SingletonMeta._instances, "looking must not construct GenerateState"


def test_abort_check_is_absent_outside_slime(monkeypatch):
    monkeypatch.delitem(sys.modules, "slime.rollout.sglang_rollout", raising=False)
    assert slime_abort_check(SimpleNamespace()) is None


def test_minimal_contract_args_give_a_failed_sample_logged_once(caplog):
    """slime's tests/plugin_contracts call generate with a bare Args and Sample(index=0, prompt="prompt")."""
    args = SimpleNamespace(partial_rollout=False)
    samples = [Sample(index=i, prompt="prompt") for i in range(2)]
    with caplog.at_level(logging.ERROR, logger="slime_tau_plugin.adapters.slime.generate"):
        for sample in samples:
            assert asyncio.run(generate(args, sample, dict(SAMPLING))) is sample
    for sample in samples:
        assert sample.status is Sample.Status.FAILED and sample.remove_sample
        assert isinstance(sample.tokens, list) and isinstance(sample.response, str)
        assert sample.response_length == 1 and sample.reward == 0.0 and sample.loss_mask == [0]
        assert "no policy server" in sample.metadata["error"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "no policy server" in errors[0].getMessage()


def test_missing_tokenizer_is_a_failed_sample_but_a_wrong_one_raises(tmp_path):
    args = SimpleNamespace(sglang_router_ip="127.0.0.1", sglang_router_port=1)
    sample = asyncio.run(generate(args, Sample(index=0, prompt=0), dict(SAMPLING)))
    assert sample.status is Sample.Status.FAILED and "no tokenizer" in sample.metadata["error"]
    wrong = SimpleNamespace(sglang_router_ip="127.0.0.1", sglang_router_port=1, hf_checkpoint=str(tmp_path / "nope"))
    with pytest.raises(ConfigError):
        asyncio.run(generate(wrong, Sample(index=0, prompt=0), dict(SAMPLING)))


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("tau_domian", "did you mean tau_domain?"),
        ("tau_max_turn", "did you mean tau_max_turns?"),
        ("tau_zzz", "valid keys"),
    ],
)
def test_unknown_tau_key_raises_naming_the_closest(key, hint):
    args = SimpleNamespace(**{key: "airline"})
    with pytest.raises(ConfigError, match=f"{key} is not a slime_tau_plugin setting.*{hint}"):
        asyncio.run(generate(args, Sample(index=0, prompt=0), dict(SAMPLING)))


def test_failed_and_finished_samples_report_non_generation_time(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    asyncio.run(generate(slime_args(server, qwen25_dir), sample, dict(SAMPLING)))
    meta = sample.metadata
    assert sample.non_generation_time == pytest.approx(meta["time_env_s"] + meta["time_user_s"], abs=1e-3)
    assert 0 < meta["time_policy_s"] < meta["episode_wall_s"]
