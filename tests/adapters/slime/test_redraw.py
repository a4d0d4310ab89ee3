"""``tau_max_redraws``: a step whose groups have no spread ends after a bounded number of redraws.

Groups are the ``Sample`` stand-in with our ``generate``'s metadata; they go through the real ``keep_group`` inside
slime's loop accounting (``tests/slime_loop_contract.draw_step``: slime's own ``should_drop_dynamic_filter_output``
where slime is importable) and then through the real log hook and all-samples hook. The fakes are slime's logging
module and its rollout-id module (external seams).
"""

from __future__ import annotations

import itertools
import logging
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.all_samples import ALL_PREFIX, all_samples_metrics
from slime_tau_plugin.adapters.slime.group_filter import keep_group, reset_guard
from slime_tau_plugin.adapters.slime.metrics import ROLLOUT_PREFIX, log_rollout
from slime_tau_plugin.adapters.slime.redraw import StepShape, redraws_after
from slime_tau_plugin.engine.errors import ConfigError
from tests.adapters.slime.test_metrics import install_fake_slime_log
from tests.contracts.slime_sample import Sample
from tests.slime_loop_contract import draw_step, first_round, set_rollout_id

REDRAW = ROLLOUT_PREFIX + "redraw/"


@pytest.fixture(autouse=True)
def fresh():
    reset_guard()
    yield
    reset_guard()


def episode(reward: float) -> Sample:
    meta = {"benchmark": "tau2", "domain": "retail", "task_id": "1", "termination_reason": "user_stop"}
    return Sample(reward=reward, status=Sample.Status.COMPLETED, metadata=meta, response_length=2, loss_mask=[1, 1])


def groups(rewards: list[float]):
    """An endless stream of groups, each with these rewards."""
    while True:
        yield [episode(r) for r in rewards]


def args_for(batch: int = 4, over: int = 8, **extra) -> SimpleNamespace:
    return SimpleNamespace(
        rollout_batch_size=batch,
        over_sampling_batch_size=over,
        n_samples_per_prompt=2,
        reward_key=None,
        tau_failure_window_groups=1000,
        **extra,
    )


@pytest.mark.parametrize(("max_redraws", "batches", "dropped"), [(0, 1, 4), (1, 2, 12), (3, 4, 28)])
def test_pass_rate_zero_ends_the_step_after_the_bound(monkeypatch, caplog, max_redraws, batches, dropped):
    """Every reward 0: no group has spread. The step still returns its 4 groups, having drawn at most
    ``tau_max_redraws`` batches beyond its first; the rest are kept short, marked, counted and logged."""
    caplog.set_level(logging.WARNING, logger="slime_tau_plugin.adapters.slime.redraw")
    calls = install_fake_slime_log(monkeypatch)
    args = args_for(tau_max_redraws=max_redraws)
    set_rollout_id(monkeypatch, 5)
    step = draw_step(args, keep_group, groups([0.0, 0.0]))
    assert len(step.kept) == 4 and step.batches - first_round(args) == max_redraws
    assert step.batches == batches and step.dropped == dropped
    assert {g[0].metadata["tau_group_filter"] for g in step.kept} == {"short_zero_std_0.0"}
    assert "tau redraw bound: step 5" in caplog.text and f"tau_max_redraws={max_redraws}" in caplog.text
    log_rollout(5, args, step.kept, None, 1.0)
    metrics = calls[-1]["metrics"]
    assert metrics[REDRAW + "redraws"] == max_redraws and metrics[REDRAW + "kept_short"] == 4
    assert metrics[REDRAW + "dropped"] == dropped and metrics[REDRAW + "bound_reached"] == 1
    assert all_samples_metrics(step.kept)[f"{ALL_PREFIX}groups/kept_short"] == 4


def test_without_a_bound_slime_draws_until_its_cap():
    """What the filter did before the bound (and slime's check_reward_nonzero_std does): never keep short."""

    def unbounded(args, group):
        out = keep_group(args, group)
        return type(out)(out.keep, out.reason)  # the verdict without keep_when_insufficient

    step = draw_step(args_for(), unbounded, groups([0.0, 0.0]), max_groups=400)
    assert not step.kept and step.batches == 50


def test_the_default_allows_one_redraw_and_groups_with_spread_are_never_kept_short(monkeypatch):
    set_rollout_id(monkeypatch, 0)
    mixed = itertools.cycle([[episode(1.0), episode(0.0)]] + [[episode(0.0), episode(0.0)]] * 3)
    step = draw_step(args_for(), keep_group, (list(g) for g in mixed))
    assert step.batches == first_round(args_for()) + 1
    marks = [g[0].metadata["tau_group_filter"] for g in step.kept]
    assert marks == ["kept"] * 4, "16 groups hold 4 with spread: the step fills with them, no group short"


def test_each_rollout_id_is_its_own_step(monkeypatch):
    args = args_for(tau_max_redraws=0)
    for rollout_id in (0, 1):
        set_rollout_id(monkeypatch, rollout_id)
        step = draw_step(args, keep_group, groups([1.0, 1.0]))
        assert step.batches == 1 and step.dropped == 4 and len(step.kept) == 4


def test_redraws_follow_slimes_refill_rule():
    shape = StepShape(batch=24, over_sampling=48, max_redraws=1)
    assert [redraws_after(shape, d) for d in (0, 24, 25, 72, 73)] == [0, 0, 1, 1, 2]
    assert StepShape.from_args(SimpleNamespace(rollout_batch_size=4), 1) == StepShape(4, 4, 1)
    assert StepShape.from_args(SimpleNamespace(), 1) is None


@pytest.mark.parametrize("value", [-1, 1.5, "two", None, True])
def test_a_bad_bound_is_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match="tau_max_redraws"):
        keep_group(args_for(tau_max_redraws=value), [episode(1.0), episode(0.0)])
