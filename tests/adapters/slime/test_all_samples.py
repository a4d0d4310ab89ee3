"""``all_samples``: metrics over every drawn group, failure causes by endpoint, group verdicts, slime's step.

Samples are the ``Sample`` stand-in with the metadata our ``generate`` writes; groups pass through the real
``keep_group`` so the verdict marks are the filter's own. The one fake is slime's logging module (an external
seam; :func:`tests.adapters.slime.test_metrics.install_fake_slime_log`).
"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.all_samples import ALL_PREFIX, all_samples_metrics, process_all_samples
from slime_tau_plugin.adapters.slime.group_filter import keep_group, reset_guard
from tests.adapters.slime.test_metrics import install_fake_slime_log
from tests.contracts.slime_sample import Sample

ARGS = SimpleNamespace(n_samples_per_prompt=2, rollout_batch_size=8, tau_failure_window_groups=100)


def episode(reward: float, domain: str = "retail", **meta) -> Sample:
    metadata = {"benchmark": "tau2", "domain": domain, "task_id": "1", "termination_reason": "user_stop", **meta}
    return Sample(reward=reward, status=Sample.Status.COMPLETED, metadata=metadata, response_length=2, loss_mask=[1, 0])


def failed(reason: str, error: str, domain: str = "retail") -> Sample:
    sample = episode(0.0, domain, termination_reason=reason, error=error)
    sample.status, sample.remove_sample = Sample.Status.FAILED, True
    return sample


def filtered(groups: list[list[Sample]]) -> list[list[Sample]]:
    reset_guard()
    for group in groups:
        keep_group(ARGS, group)
    return groups


def test_failure_causes_per_domain_and_group_verdicts():
    groups = filtered(
        [
            [episode(1.0), episode(0.0)],
            [failed("user_error", "UserSimulatorError: down"), failed("user_error", "UserSimulatorError: down")],
            [episode(1.0, "airline"), failed("policy_error", "PolicyConnectionError: refused", "airline")],
            [episode(1.0), episode(1.0)],
        ]
    )
    m = all_samples_metrics(groups)
    assert m[f"{ALL_PREFIX}tau2/retail/samples"] == 6 and m[f"{ALL_PREFIX}tau2/airline/samples"] == 2
    assert m[f"{ALL_PREFIX}tau2/retail/pass_rate"] == pytest.approx(3 / 6)
    assert m[f"{ALL_PREFIX}tau2/retail/status/failed"] == pytest.approx(2 / 6)
    assert m[f"{ALL_PREFIX}tau2/retail/failed/user"] == pytest.approx(2 / 6)
    assert m[f"{ALL_PREFIX}tau2/airline/failed/policy"] == pytest.approx(1 / 2)
    assert f"{ALL_PREFIX}tau2/airline/failed/user" not in m
    assert m[f"{ALL_PREFIX}groups/drawn"] == 4 and m[f"{ALL_PREFIX}groups/kept"] == 1
    assert m[f"{ALL_PREFIX}groups/dropped_failed_user"] == 1
    assert m[f"{ALL_PREFIX}groups/dropped_zero_std_1.0"] == 2


def test_groups_without_our_filter_count_as_drawn_only_and_foreign_samples_are_skipped():
    foreign = Sample(reward=1.0, metadata={})
    m = all_samples_metrics([[episode(1.0), episode(0.0)], [foreign, foreign]])
    assert m[f"{ALL_PREFIX}groups/drawn"] == 2 and f"{ALL_PREFIX}groups/kept" not in m
    assert m[f"{ALL_PREFIX}tau2/retail/samples"] == 2


def test_process_all_samples_logs_through_slime_at_its_rollout_step(monkeypatch):
    logged = install_fake_slime_log(monkeypatch)
    hooks = types.ModuleType("slime.rollout.sample_hooks")
    hooks._current_rollout_id = 7  # what slime's RolloutManager.generate sets before the rollout
    monkeypatch.setitem(sys.modules, "slime.rollout.sample_hooks", hooks)
    process_all_samples(ARGS, filtered([[episode(1.0), episode(0.0)]]), None)
    (call,) = logged
    assert call["step_key"] == "rollout/step" and call["metrics"]["rollout/step"] == 7
    assert call["metrics"][f"{ALL_PREFIX}groups/kept"] == 1
