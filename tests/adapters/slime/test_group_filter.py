"""``group_filter``: the dynamic filter's verdicts and the failure guard that stops a run on a dead endpoint.

Groups are built from the ``Sample`` stand-in with the metadata our ``generate`` writes for a FAILED
episode (``termination_reason``, ``failed_endpoint``, ``error``). Where slime is importable, the return type
is slime's own ``DynamicFilterOutput`` and its drop logic is applied as ``generate_rollout_async`` applies it.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.group_filter import (
    FailureGuard,
    FailureGuardError,
    FailureGuardSettings,
    failure_endpoint,
    guard_settings,
    keep_group,
    reset_guard,
)
from slime_tau_plugin.engine.errors import (
    ConfigError,
    EnvBackendError,
    JudgeError,
    MissingSettingError,
    PolicyConnectionError,
    UserSimulatorError,
    failed_endpoint_of,
)
from tests.contracts.slime_sample import Sample

DEAD_USER = "UserSimulatorError: user simulator: POST http://127.0.0.1:9/v1/chat/completions failed (after 4 tries)"


@pytest.fixture(autouse=True)
def fresh_guard():
    reset_guard()
    yield
    reset_guard()


def ok(reward: float) -> Sample:
    return Sample(reward=reward, status=Sample.Status.COMPLETED, metadata={"termination_reason": "user_stop"})


def failed(reason: str = "user_error", error: str = DEAD_USER, endpoint: str | None = None) -> Sample:
    """A FAILED sample as ``generate`` writes it: the typed ``failed_endpoint`` next to the error's words."""
    endpoint = endpoint or {"user_error": "user", "policy_error": "policy"}.get(reason, "env")
    meta = {"termination_reason": reason, "error": error, "failed_endpoint": endpoint}
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
    flaky, mixed = [failed(), failed(), failed(), ok(1.0)], [ok(1.0), ok(0.0), ok(1.0), ok(1.0)]
    for i in range(200):  # every other group loses 3 of 4 episodes: 37.5% of the window
        verdict = keep_group(args, list(flaky) if i % 2 else list(mixed))
        assert verdict.reason == ("zero_std_1.0" if i % 2 else None)  # judged on its merits, never stopped
    healthy = [ok(1.0), ok(0.0)] * 2
    outage = [failed()] * 4
    # an outage of two groups after a healthy stretch stays under the share: 8 of 16, not more than half
    verdicts = [keep_group(args, list(g)) for g in (healthy, healthy, healthy, healthy, outage, outage)]
    assert [v.reason for v in verdicts] == [None] * 4 + ["failed_user"] * 2
    # four healthy groups push that outage out of the window: a second one of two groups is tolerated too
    # (were the first outage still counted, this would be 16 failures of 16)
    for group in (healthy, healthy, healthy, healthy, outage, outage):
        keep_group(args, list(group))
    # and the guard still watches: a third outage group in a row is more than half of the window
    with pytest.raises(FailureGuardError, match="12 of the last 16 episodes"):
        keep_group(args, list(outage))


def test_causes_are_counted_per_endpoint_not_summed():
    guard = FailureGuard(FailureGuardSettings(max_failed_share=0.5, window_groups=2))
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
    assert guard_settings(SimpleNamespace(rollout_batch_size=32)) == FailureGuardSettings(0.5, 32)
    assert guard_settings(SimpleNamespace()) == FailureGuardSettings(0.5, 8)
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
    ("reason", "exc", "endpoint"),
    [
        ("user_error", UserSimulatorError("user simulator: POST http://127.0.0.1:9 failed"), "user"),
        ("policy_error", PolicyConnectionError("cannot reach http://router"), "policy"),
        ("env_error", JudgeError("NL-assertion judge failed: Timeout: litellm judge gpt-4.1 timed out"), "judge"),
        ("env_error", EnvBackendError("reward failed: the word judge in an environment error"), "env"),
        ("env_error", EnvBackendError("get_response failed: KeyError"), "env"),
        ("env_error", KeyError("get_response"), "env"),
        ("env_error", MissingSettingError("no tokenizer: set --hf-checkpoint"), "config"),
        ("env_error", PolicyConnectionError("the router is down before the episode started"), "policy"),
    ],
)
def test_failure_endpoint_reads_the_typed_endpoint_the_error_names(reason, exc, endpoint):
    sample = failed(reason, f"{type(exc).__name__}: {exc}", failed_endpoint_of(exc).value)
    assert failure_endpoint(sample) == endpoint
    assert failure_endpoint(ok(1.0)) is None
    assert failure_endpoint(Sample(reward=0.0, remove_sample=True)) == "other"


def test_failure_endpoint_never_reads_the_errors_words():
    # the words say judge and user, the typed field says env: the field wins
    sample = failed("env_error", "UserSimulatorError: JudgeError: made up", "env")
    assert failure_endpoint(sample) == "env"
    # a FAILED sample without the field (an older writer) is classified by its termination reason alone
    bare = Sample(reward=0.0, status=Sample.Status.FAILED, metadata={"termination_reason": "env_error"})
    bare.metadata["error"] = "JudgeError: the judge timed out"
    assert failure_endpoint(bare) == "env"
    assert failure_endpoint(failed("deadline", "EpisodeDeadlineError: too slow", "policy")) == "deadline"


def test_returns_slimes_own_output_type_when_slime_is_importable():
    base_types = pytest.importorskip("slime.rollout.filter_hub.base_types")
    args = args_for()
    out = base_types.call_dynamic_filter(keep_group, args, [failed() for _ in range(4)])
    assert isinstance(out, base_types.DynamicFilterOutput) and out.reason == "failed_user"
    assert base_types.should_drop_dynamic_filter_output(out, remaining_batch_size=8, target_data_size=4)
    kept = base_types.call_dynamic_filter(keep_group, args, [ok(1.0), ok(0.0), ok(1.0), ok(1.0)])
    assert kept.keep is True
