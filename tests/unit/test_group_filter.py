"""``group_filter``: the dynamic filter's verdicts and the failure guard that stops a run on a dead endpoint.

Groups are built from the ``Sample`` stand-in with the metadata our ``generate`` writes for a FAILED
episode (``termination_reason``, ``error``). Where slime is importable, the return type is slime's own
``DynamicFilterOutput`` and its drop logic is applied as ``generate_rollout_async`` applies it.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.group_filter import (
    FailureGuard,
    GuardSettings,
    failure_endpoint,
    guard_settings,
    keep_group,
    reset_guard,
)
from slime_tau_plugin.engine.errors import ConfigError, FailureGuardError
from tests.contracts.slime_sample import Sample

DEAD_USER = "UserSimulatorError: user simulator: POST http://127.0.0.1:9/v1/chat/completions failed (after 4 tries)"


@pytest.fixture(autouse=True)
def fresh_guard():
    reset_guard()
    yield
    reset_guard()


def ok(reward: float) -> Sample:
    return Sample(reward=reward, status=Sample.Status.COMPLETED, metadata={"termination_reason": "user_stop"})


def failed(reason: str = "user_error", error: str = DEAD_USER) -> Sample:
    meta = {"termination_reason": reason, "error": error}
    return Sample(reward=0.0, status=Sample.Status.FAILED, remove_sample=True, metadata=meta)


def args_for(**extra) -> SimpleNamespace:
    return SimpleNamespace(n_samples_per_prompt=4, rollout_batch_size=4, reward_key=None, **extra)


def test_zero_spread_group_is_dropped_with_slimes_reason_and_a_mixed_group_is_kept():
    args = args_for()
    same = [ok(1.0) for _ in range(4)]
    verdict = keep_group(args, same)
    assert not verdict.keep and verdict.reason == "zero_std_1.0"
    assert {s.metadata["tau_group_filter"] for s in same} == {"zero_std_1.0"}
    mixed = [ok(1.0), ok(0.0), ok(1.0), ok(0.0)]
    verdict = keep_group(args, mixed)
    assert verdict.keep and verdict.reason is None
    assert mixed[0].metadata["tau_group_filter"] == "kept"


def test_spread_ignores_failed_episodes():
    # slime's check_reward_nonzero_std keeps [1, 1, 1, FAILED 0]: the failure's 0 is its only spread
    verdict = keep_group(args_for(), [ok(1.0), ok(1.0), failed(), ok(1.0)])
    assert not verdict.keep and verdict.reason == "zero_std_1.0"
    assert not keep_group(args_for(), [ok(1.0), failed(), failed(), failed()]).keep  # one survivor: no spread
    assert keep_group(args_for(), [ok(1.0), failed(), ok(0.0), failed()]).keep


def test_all_failed_group_is_reported_with_its_endpoint(caplog):
    caplog.set_level(logging.WARNING, logger="slime_tau_plugin.adapters.slime.group_filter")
    verdict = keep_group(args_for(tau_failure_window_groups=100), [failed() for _ in range(4)])
    assert not verdict.keep and verdict.reason == "failed_user"
    assert "all FAILED on the user simulator" in caplog.text and "127.0.0.1:9" in caplog.text


def test_dead_endpoint_stops_the_run_within_the_window_with_one_line():
    args = args_for(tau_max_failed_share=0.5, tau_failure_window_groups=4)
    # capacity 4 groups x 4 = 16 episodes; more than 8 FAILED on the user decides it: the third group
    keep_group(args, [failed() for _ in range(4)])
    keep_group(args, [failed() for _ in range(4)])
    with pytest.raises(FailureGuardError) as info:
        keep_group(args, [failed() for _ in range(4)])
    message = str(info.value)
    assert "\n" not in message
    assert "12 of the last 12 episodes (3 groups) FAILED on the user simulator (tau_user_base_url)" in message
    assert "tau_max_failed_share=0.5" in message and DEAD_USER in message
    assert info.value.endpoint == "user" and info.value.failed == 12


def test_flaky_endpoint_below_the_share_never_stops_and_failures_roll_out_of_the_window():
    args = args_for(tau_max_failed_share=0.5, tau_failure_window_groups=4)
    for i in range(200):  # every other group loses 3 of 4 episodes: 37.5% of the window
        keep_group(args, [failed(), failed(), failed(), ok(1.0)] if i % 2 else [ok(1.0), ok(0.0), ok(1.0), ok(1.0)])
    # an outage of two groups after a healthy stretch stays under the share too
    healthy = [ok(1.0), ok(0.0)] * 2
    for group in (healthy, healthy, healthy, healthy, [failed()] * 4, [failed()] * 4, healthy, healthy):
        keep_group(args, list(group))  # 8 of 16 at most: not more than half


def test_causes_are_counted_per_endpoint_not_summed():
    guard = FailureGuard(GuardSettings(max_failed_share=0.5, window_groups=2))
    guard.observe(
        [failed("user_error"), failed("user_error"), failed("policy_error", "PolicyConnectionError: x"), ok(1)]
    )
    guard.observe([failed("policy_error", "PolicyConnectionError: x"), failed("user_error"), ok(1), ok(0)])
    # 3 user + 2 policy = 5 of 8 FAILED, but no single endpoint has more than 4
    with pytest.raises(FailureGuardError, match="on the policy server"):
        guard.observe([failed("policy_error", "PolicyHTTPError: 503")] * 4)


def test_share_one_turns_the_guard_off():
    args = args_for(tau_max_failed_share=1.0, tau_failure_window_groups=2)
    for _ in range(10):
        assert keep_group(args, [failed() for _ in range(4)]).reason == "failed_user"


def test_window_defaults_to_one_step_of_groups():
    assert guard_settings(SimpleNamespace(rollout_batch_size=32)) == GuardSettings(0.5, 32)
    assert guard_settings(SimpleNamespace()) == GuardSettings(0.5, 8)
    assert guard_settings(SimpleNamespace(tau_max_failed_share=0.25, tau_failure_window_groups=3)).window_groups == 3


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tau_max_failed_share", 0),
        ("tau_max_failed_share", 1.5),
        ("tau_max_failed_share", "half"),
        ("tau_max_failed_share", True),
        ("tau_failure_window_groups", 0),
        ("tau_failure_window_groups", 2.5),
    ],
)
def test_bad_guard_settings_name_the_key(key, value):
    with pytest.raises(ConfigError, match=key):
        keep_group(SimpleNamespace(rollout_batch_size=4, **{key: value}), [ok(1.0), ok(0.0)])


@pytest.mark.parametrize(
    ("reason", "error", "endpoint"),
    [
        ("user_error", DEAD_USER, "user"),
        ("policy_error", "PolicyConnectionError: cannot reach http://router", "policy"),
        ("env_error", "JudgeError: NL-assertion judge failed: Timeout: litellm judge gpt-4.1 timed out", "judge"),
        ("env_error", "EnvBackendError: reward failed: the word judge in an environment error", "env"),
        ("env_error", "EnvBackendError: get_response failed: KeyError", "env"),
        ("env_error", "MissingSettingError: no tokenizer: set --hf-checkpoint", "config"),
    ],
)
def test_failure_endpoint_reads_the_termination_reason_and_error(reason, error, endpoint):
    assert failure_endpoint(failed(reason, error)) == endpoint
    assert failure_endpoint(ok(1.0)) is None
    assert failure_endpoint(Sample(reward=0.0, remove_sample=True)) == "other"


def test_returns_slimes_own_output_type_when_slime_is_importable():
    base_types = pytest.importorskip("slime.rollout.filter_hub.base_types")
    args = args_for()
    out = base_types.call_dynamic_filter(keep_group, args, [failed() for _ in range(4)])
    assert isinstance(out, base_types.DynamicFilterOutput) and out.reason == "failed_user"
    assert base_types.should_drop_dynamic_filter_output(out, remaining_batch_size=8, target_data_size=4)
    kept = base_types.call_dynamic_filter(keep_group, args, [ok(1.0), ok(0.0), ok(1.0), ok(1.0)])
    assert kept.keep is True
