"""``advantages.post_process_rewards`` against slime's ``_post_process_rewards`` (slime/ray/rollout.py:608).

:func:`slime_formula` transcribes slime's formula line by line (torch float32 in slime, floats here): on
groups without failures ours must equal it. Where slime is importable (its scratch venv), the real method
is called too. Groups with failures are checked against numbers worked out by hand.
"""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.advantages import post_process_rewards
from slime_tau_plugin.adapters.slime.group_filter import FailureGuardError, reset_guard
from slime_tau_plugin.adapters.slime.sample_view import is_failed, reward_value
from tests.contracts.slime_sample import Sample

ESTIMATORS = ("grpo", "gspo", "cispo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "ppo")


def args_for(estimator="grpo", n=4, batch=2, *, norm=True, std=True, reward_key=None) -> SimpleNamespace:
    return SimpleNamespace(
        advantage_estimator=estimator,
        n_samples_per_prompt=n,
        rollout_batch_size=batch,
        rewards_normalization=norm,
        grpo_std_normalization=std,
        reward_key=reward_key,
    )


def slime_formula(args, rewards: list[float]) -> list[float]:
    """slime's ``_post_process_rewards`` without its custom hook, in plain floats."""
    if not (
        args.advantage_estimator in ["grpo", "gspo", "cispo", "reinforce_plus_plus_baseline"]
        and args.rewards_normalization
    ):
        return list(rewards)
    if len(rewards) == args.n_samples_per_prompt * args.rollout_batch_size:
        rows = [rewards[i : i + args.n_samples_per_prompt] for i in range(0, len(rewards), args.n_samples_per_prompt)]
    else:
        rows = [list(rewards)]
    out = []
    for row in rows:
        mean = sum(row) / len(row)
        row = [r - mean for r in row]
        if args.advantage_estimator in ["grpo", "gspo", "cispo"] and args.grpo_std_normalization:
            std = math.sqrt(sum(r * r for r in row) / (len(row) - 1))  # torch.std: unbiased
            row = [r / (std + 1e-6) for r in row]
        out.extend(row)
    return out


def ok(reward: float) -> Sample:
    return Sample(reward=reward, status=Sample.Status.COMPLETED)


def failed(reward: float = 0.0) -> Sample:
    return Sample(reward=reward, status=Sample.Status.FAILED, remove_sample=True)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize(("norm", "std"), [(True, True), (True, False), (False, True)])
def test_equals_slimes_formula_on_groups_without_failures(estimator, norm, std):
    rng = random.Random(7)
    args = args_for(estimator, n=4, batch=3, norm=norm, std=std)
    for _ in range(20):
        rewards = [rng.choice([0.0, 0.25, 1.0]) if rng.random() < 0.8 else rng.random() for _ in range(12)]
        raw, adv = post_process_rewards(args, [ok(r) for r in rewards])
        assert raw == rewards
        assert adv == pytest.approx(slime_formula(args, rewards), rel=1e-9, abs=1e-9)


def test_unequal_batch_is_one_group_as_in_slime():
    args = args_for("grpo", n=4, batch=3)  # 12 expected, 5 given: slime normalises over all of them
    rewards = [1.0, 0.0, 0.0, 1.0, 1.0]
    _, adv = post_process_rewards(args, [ok(r) for r in rewards])
    assert adv == pytest.approx(slime_formula(args, rewards))
    assert sum(adv) == pytest.approx(0.0, abs=1e-9)


def test_failed_sample_is_left_out_of_mean_and_std_and_gets_zero():
    # group [1, FAILED, 1, 0]: survivors 1, 1, 0 -> mean 2/3, centred 1/3, 1/3, -2/3, unbiased std sqrt(1/3)
    args = args_for("grpo", n=4, batch=1)
    raw, adv = post_process_rewards(args, [ok(1.0), failed(), ok(1.0), ok(0.0)])
    std = math.sqrt(1 / 3)
    assert raw == [1.0, 0.0, 1.0, 0.0]
    assert adv == pytest.approx([(1 / 3) / (std + 1e-6), 0.0, (1 / 3) / (std + 1e-6), (-2 / 3) / (std + 1e-6)])
    # slime's own numbers for the same group count the failure as a 0: the passes get 0.866, not 0.577
    assert slime_formula(args, raw)[0] == pytest.approx(0.5 / math.sqrt(1 / 3), rel=1e-5)


def test_all_pass_group_with_a_failure_has_no_signal():
    args = args_for("grpo", n=4, batch=1)
    _, adv = post_process_rewards(args, [ok(1.0), ok(1.0), failed(), ok(1.0)])
    assert adv == [0.0, 0.0, 0.0, 0.0]
    assert slime_formula(args, [1.0, 1.0, 0.0, 1.0])[0] > 0.4  # slime would reward the passes


def test_all_failed_group_and_single_survivor_get_zero_while_other_groups_normalise():
    args = args_for("grpo", n=3, batch=3)
    args.tau_max_failed_share = 1.0  # the failure guard (which this step would trip) never stops
    samples = [failed(), failed(), failed(), failed(), ok(1.0), failed(), ok(1.0), ok(0.0), ok(0.5)]
    _, adv = post_process_rewards(args, samples)
    assert adv[:6] == [0.0] * 6
    assert adv[6:] == pytest.approx(slime_formula(args_for("grpo", n=3, batch=1), [1.0, 0.0, 0.5]))


def test_baseline_without_std_centres_on_survivors_only():
    for estimator, std in (("reinforce_plus_plus_baseline", True), ("grpo", False)):
        args = args_for(estimator, n=4, batch=1, std=std)
        _, adv = post_process_rewards(args, [ok(1.0), failed(), ok(0.0), ok(0.5)])
        assert adv == pytest.approx([0.5, 0.0, -0.5, 0.0])


@pytest.mark.parametrize("estimator", ["reinforce_plus_plus", "ppo"])
def test_unnormalised_estimators_keep_raw_rewards_but_zero_failures(estimator):
    args = args_for(estimator, n=2, batch=2)
    raw, rewards = post_process_rewards(args, [ok(1.0), failed(0.7), ok(0.3), ok(0.0)])
    assert raw == [1.0, 0.7, 0.3, 0.0]
    assert rewards == [1.0, 0.0, 0.3, 0.0]


def test_failed_means_status_failed_or_remove_sample_and_reward_key_is_honoured():
    assert is_failed(failed()) and is_failed(Sample(reward=1.0, remove_sample=True))
    assert is_failed(Sample(reward=0.0, status=Sample.Status.FAILED))
    assert not is_failed(Sample(reward=0.0, status=Sample.Status.TRUNCATED))
    args = args_for("grpo", n=2, batch=1, reward_key="task")
    samples = [Sample(reward={"task": 1.0, "shaped": 0.2}), Sample(reward={"task": 0.0, "shaped": 0.9})]
    assert [reward_value(args, s) for s in samples] == [1.0, 0.0]
    raw, adv = post_process_rewards(args, samples)
    assert raw == [1.0, 0.0] and adv[0] > 0 > adv[1]


def test_equals_slimes_own_method_when_slime_is_importable():
    pytest.importorskip("torch")
    rollout = pytest.importorskip("slime.ray.rollout")
    from slime.utils.types import Sample as SlimeSample

    manager_cls = getattr(rollout.RolloutManager, "__ray_actor_class__", rollout.RolloutManager)  # @ray.remote

    rng = random.Random(3)
    for estimator in ESTIMATORS:
        for count in (8, 7):
            args = args_for(estimator, n=4, batch=2)
            samples = [SlimeSample(reward=rng.choice([0.0, 0.5, 1.0])) for _ in range(count)]
            manager = SimpleNamespace(args=args, custom_reward_post_process_func=None)
            slime_raw, slime_adv = manager_cls._post_process_rewards(manager, samples)
            raw, adv = post_process_rewards(args, samples)
            assert raw == slime_raw
            assert adv == pytest.approx(slime_adv, rel=1e-5, abs=1e-5)


def _user_failed() -> Sample:
    meta = {"termination_reason": "user_error", "failed_endpoint": "user", "error": "UserSimulatorError: refused"}
    return Sample(reward=0.0, status=Sample.Status.FAILED, remove_sample=True, metadata=meta)


def test_groups_no_filter_saw_feed_the_failure_guard_every_step():
    """slime's fully-async rollout runs no dynamic filter: the reward post-process (called every step, every
    mode) must stop a run whose user simulator is dead, naming it, and leave groups a filter saw alone."""
    reset_guard()
    args = args_for("grpo", n=2, batch=2)
    seen = [_user_failed() for _ in range(4)]
    for sample in seen:
        sample.metadata["tau_group_filter"] = "failed_user"  # keep_group saw these and counted them already
    post_process_rewards(args, seen)
    with pytest.raises(FailureGuardError, match="FAILED on the user simulator") as raised:
        post_process_rewards(args, [_user_failed() for _ in range(4)])
    assert raised.value.endpoint == "user" and raised.value.failed == 4
    reset_guard()
