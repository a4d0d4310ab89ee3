"""What we use of verl 0.9.1's V1 trainer beyond its documented extension points, pinned so that a verl that changes
it fails here by name (docs/verl.md, "What rides on verl's internals").

The custom sampler (``trainer.v1.sampler.custom_sampler``) is verl's public hook; that its ``sample`` runs before
the advantages, that the metrics it returns reach the step's logged metrics, and that validation reads the rows'
``reward_extra_info`` from TransferQueue after it, are verl's code as it stands, not a documented contract.
"""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("transfer_queue", reason="TransferQueue (verl's V1 data path) is not installed")

from verl.trainer.ppo.v1.trainer_base import PPOTrainer  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402


def _in_order(source: str, *pieces: str) -> list[int]:
    at = [source.find(piece) for piece in pieces]
    assert all(i >= 0 for i in at), [p for p, i in zip(pieces, at, strict=True) if i < 0]
    return at


def test_the_step_samples_first_and_logs_the_samplers_metrics():
    """τ's guard stops a step before its advantages, and τ's step metrics reach verl's logger."""
    step = inspect.getsource(PPOTrainer._step_once)
    at = _in_order(
        step,
        "batch, off_policy_metrics = self.replay_buffer.sample(",
        "metrics.update(off_policy_metrics)",
        "self._compute_advantage(batch",
    )
    assert at == sorted(at), "verl no longer samples before its advantages, or drops the sampler's metrics"
    assert "metrics_aggregator.add_step_metrics(iter_metrics" in inspect.getsource(PPOTrainer.step)


def test_validation_reads_reward_extra_info_after_the_sampler():
    """τ's ``tau_pass^k`` written into ``reward_extra_info`` by the sampler is what verl's validation averages."""
    validate = inspect.getsource(PPOTrainer._validate)
    at = _in_order(
        validate,
        'self.replay_buffer.sample(\n                global_steps=self.global_steps, partition_id="val"',
        '"extra_fields"',
        'extra_field.get("reward_extra_info", {})',
        "return self._val_metrics_update(",
    )
    assert at == sorted(at)


def test_estimators_other_than_grpo_go_through_the_registry():
    """``tau_<name>`` is reached under V1 because only verl's own ``grpo`` takes the multi-trajectory path."""
    source = inspect.getsource(compute_advantage_for_multi_trajectories)
    assert "if adv_estimator != core_algos.AdvantageEstimator.GRPO:\n        return compute_advantage(" in source


def test_the_replay_buffer_is_chosen_by_the_mode_string_and_a_custom_sampler_gets_sampler_kwargs():
    build = inspect.getsource(PPOTrainer._build_replay_buffer)
    assert 'sampler_cls = ReplayBuffer if self.trainer_mode == "sync" else ReplayBufferAsync' in build
    assert "sampler_kwargs=sampler_config.sampler_kwargs" in build
