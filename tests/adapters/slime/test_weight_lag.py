"""``weight_lag.py``: the weight lag a sample is trained with (slime's rollout log hook) and the mask the reward
post-process applies to the data slime trains (``tests/slime_loop_contract.train_data``: slime's conversion order).

Episodes are played through our ``generate`` against the oracle server over HTTP; the "weight push" is SGLang's
``POST /update_weight_version`` on that server, at the points slime's drivers push. The fakes are slime's
logging module (``test_metrics.install_fake_slime_log``) and, without slime, its rollout-id module (external seams).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from slime_tau_plugin.adapters.slime.advantages import post_process_rewards
from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.adapters.slime.metrics import ROLLOUT_PREFIX, log_rollout
from slime_tau_plugin.adapters.slime.weight_lag import SPANS_KEY, train_clock
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.errors import ConfigError
from tests.adapters.slime.test_metrics import install_fake_slime_log
from tests.contracts.slime_sample import Sample
from tests.slime_args import slime_args
from tests.slime_loop_contract import set_rollout_id, train_data

SAMPLING = {"temperature": 1.0, "max_new_tokens": 2048, "no_stop_trim": True, "skip_special_tokens": False}
LAG = ROLLOUT_PREFIX + "lag/"
POST_PROCESS = {"custom_reward_post_process_path": "slime_tau_plugin.adapters.slime.advantages.post_process_rewards"}


@pytest.fixture
def oracle(oracle_server_factory, qwen25):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    train_clock().forget()  # a new run: its first logged step sets the clock
    yield server
    server.weight_version = "default"


def push(server, version: int) -> None:
    """What slime's weight update leaves on the engine: SGLang's route, over HTTP."""
    body = json.dumps({"new_version": str(version)}).encode()
    request = urllib.request.Request(f"{server.url}/update_weight_version", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert json.loads(reply.read())["new_version"] == str(version)


def played(server, qwen25_dir, backend, position: int, **extra) -> Sample:
    row = task_row(position, backend.task_refs("retail", "train")[position])
    sample = Sample(index=position, prompt=row["index"], metadata=row["metadata"], session_id=f"lag-{position}")
    asyncio.run(generate(slime_args(server, qwen25_dir, **extra), sample, dict(SAMPLING)))
    assert sample.status is Sample.Status.COMPLETED and sample.metadata[SPANS_KEY]
    return sample


def logged(monkeypatch, rollout_id: int, args, groups) -> dict[str, float]:
    calls = install_fake_slime_log(monkeypatch)
    assert log_rollout(rollout_id, args, groups, None, 1.0) is False
    return calls[-1]["metrics"]


def test_a_finished_sibling_handed_back_is_trained_two_versions_late(oracle, qwen25_dir, tau2_backend, monkeypatch):
    """train.py: a push after every step. A sibling that finished in step 0 while its group was aborted comes
    back COMPLETED (``--partial-rollout``) and trains in step 2: every id it holds is 2 versions old, older than
    ``tau_max_weight_lag: 1``, so the reward post-process masks it in the data slime trains (the episode-level
    mask never saw it again)."""
    args = slime_args(oracle, qwen25_dir, partial_rollout=True, tau_max_weight_lag=1, **POST_PROCESS)
    push(oracle, 1)
    fresh, sibling = (played(oracle, qwen25_dir, tau2_backend, i) for i in (0, 1))
    first = logged(monkeypatch, 0, args, [[fresh]])
    assert first[LAG + "train_version"] == 1 and first[LAG + "tokens_0"] == 1.0
    assert first[LAG + "stale_token_share"] == 0.0 and fresh.metadata["tau_train_lag"] == 0
    push(oracle, 2)
    push(oracle, 3)
    late = played(oracle, qwen25_dir, tau2_backend, 2)
    old, new = sum(sibling.loss_mask), sum(late.loss_mask)
    step2 = logged(monkeypatch, 2, args, [[sibling, late]])
    assert step2[LAG + "train_version"] == 3
    assert step2[LAG + "tokens_2"] == pytest.approx(old / (old + new))
    assert step2[LAG + "tokens_0"] == pytest.approx(new / (old + new))
    assert step2[LAG + "stale_token_share"] == pytest.approx(old / (old + new))  # older than tau_max_weight_lag 1
    assert step2[LAG + "mean"] == pytest.approx(2 * old / (old + new)) and step2[LAG + "max"] == 2
    assert sibling.metadata["tau_train_lag"] == 2 and late.metadata["tau_train_lag"] == 0
    assert sum(sibling.loss_mask) == old, "the log hook measures; the reward post-process masks"
    # slime's conversion: the reward post-process runs on these samples, then their masks are what trains
    set_rollout_id(monkeypatch, 2)
    trained = train_data(args, [sibling, late])
    assert sum(trained["loss_masks"][0]) == 0 and not any(trained["rollout_log_probs"][0])
    assert sum(trained["loss_masks"][1]) == new and any(trained["rollout_log_probs"][1])


def test_the_mask_reaches_the_trained_sample_whatever_order_slime_logs_in(
    oracle, qwen25_dir, tau2_backend, monkeypatch
):
    """A slime that converts samples to train data before (or without) running the log hook: the reward
    post-process alone computes the trainer's version and masks the stale sibling, and the log hook that runs
    after it reports the same version."""
    args = slime_args(oracle, qwen25_dir, partial_rollout=True, tau_max_weight_lag=1, **POST_PROCESS)
    push(oracle, 1)
    fresh, sibling = (played(oracle, qwen25_dir, tau2_backend, i) for i in (5, 6))
    set_rollout_id(monkeypatch, 0)
    assert sum(train_data(args, [fresh])["loss_masks"][0]) == sum(fresh.loss_mask) > 0
    push(oracle, 2)
    push(oracle, 3)
    late = played(oracle, qwen25_dir, tau2_backend, 7)
    set_rollout_id(monkeypatch, 2)
    trained = train_data(args, [sibling, late])
    assert sibling.metadata["tau_train_version"] == 3
    assert sum(trained["loss_masks"][0]) == 0 and not any(trained["rollout_log_probs"][0])
    assert sum(trained["loss_masks"][1]) == sum(late.loss_mask) > 0
    assert logged(monkeypatch, 2, args, [[sibling, late]])[LAG + "train_version"] == 3


def test_a_queued_fully_async_sample_trains_one_version_late(oracle, qwen25_dir, tau2_backend, monkeypatch):
    """train_async.py: rollout 1 is drawn while rollout 0 trains and the push waits for it, so a group that sat
    in the fully-async worker's queue was sampled by version 1 and trains on version 2; ids masked (loss mask 0)
    count for nothing."""
    args = slime_args(oracle, qwen25_dir)
    push(oracle, 1)
    first, queued = (played(oracle, qwen25_dir, tau2_backend, i) for i in (3, 4))
    assert logged(monkeypatch, 0, args, [[first]])[LAG + "tokens_0"] == 1.0
    mask, queued.loss_mask = queued.loss_mask, [0] * queued.response_length  # slime's mask: nothing of it trains
    assert logged(monkeypatch, 1, args, [[queued]]).get(LAG + "tokens_1") is None
    queued.loss_mask = mask
    step1 = logged(monkeypatch, 1, args, [[queued]])
    assert step1[LAG + "train_version"] == 2 and step1[LAG + "tokens_1"] == 1.0
    assert LAG + "stale_token_share" not in step1, "no limit set: no stale share"
    assert queued.metadata["tau_train_lag"] == 1 and queued.loss_mask == mask, "no limit: nothing masked"


@pytest.mark.parametrize("value", [-1, "two", 1.5])
def test_a_bad_lag_limit_is_refused_naming_the_key(value, monkeypatch):
    install_fake_slime_log(monkeypatch)
    args = slime_args("http://127.0.0.1:1", "unused", tau_max_weight_lag=value)
    with pytest.raises(ConfigError, match="tau_max_weight_lag"):
        log_rollout(0, args, [], None, 1.0)
    with pytest.raises(ConfigError, match="tau_max_weight_lag"):
        post_process_rewards(args, [Sample(reward=1.0)])
