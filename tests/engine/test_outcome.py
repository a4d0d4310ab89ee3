"""The front-door rules written once (``outcome.py``): failed result, filler, must-not-train, reward shaping."""

from __future__ import annotations

from slime_tau_plugin.adapters.slime.generate import fill_sample
from slime_tau_plugin.adapters.slime.group_filter import failure_endpoint
from slime_tau_plugin.adapters.slime.metrics import episode_metrics
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import (
    FailedEndpoint,
    JudgeError,
    MissingSettingError,
    PolicyConnectionError,
    UserSimulatorError,
)
from slime_tau_plugin.engine.outcome import failed_result, filler_id, trainable_trajectory, training_reward
from slime_tau_plugin.engine.workers.play import finish
from slime_tau_plugin.tools.cli.play.runner import RolloutSample
from tests.fakes.tokenizer import FakeTokenizer

REF = TaskRef("tau2", "retail", "train", "7")


def _result(reason: TerminationReason, reward: float, **info: float) -> EpisodeResult:
    traj = Trajectory((1, 2, 3))
    traj.add_model_turn([4, 5], [-0.5, -0.25])
    return EpisodeResult(REF, reason, traj, reward=reward, reward_info=dict(info))


def test_a_result_that_failed_early_names_the_configured_task_set_and_the_error():
    result = failed_result(TauConfig(domain="airline"), ValueError("boom"))
    assert result.task == TaskRef("tau2", "airline", "train", "?")
    assert result.termination is TerminationReason.ENV_ERROR and result.error == "ValueError: boom"


def test_every_front_door_gets_one_filler_and_one_must_not_train_rule():
    tokenizer = FakeTokenizer()
    assert filler_id(tokenizer) == tokenizer.eos_token_id and filler_id(object()) == 0
    empty = trainable_trajectory(failed_result(TauConfig(), RuntimeError("x")), tokenizer)
    assert empty.response_ids == [tokenizer.eos_token_id] and empty.loss_mask == [0]
    for reason in TerminationReason:
        traj = trainable_trajectory(_result(reason, 1.0), tokenizer)
        assert (sum(traj.loss_mask) > 0) is reason.is_trainable, reason
    assert not TerminationReason.ABORTED.is_trainable and TerminationReason.MAX_TURNS.is_trainable


def test_reward_shaping_adds_the_partial_score_in_training_only():
    shaped = TauConfig(reward_shaping=0.5)
    partial = _result(TerminationReason.USER_STOP, 0.0, partial_score=0.6)
    assert training_reward(partial, shaped, evaluation=False) == 0.3
    assert training_reward(partial, shaped, evaluation=True) == 0.0, "evaluation is never shaped"
    assert training_reward(partial, TauConfig(), evaluation=False) == 0.0, "off by default"
    assert training_reward(_result(TerminationReason.USER_STOP, 1.0), shaped, evaluation=False) == 1.0
    assert training_reward(_result(TerminationReason.ENV_ERROR, 0.0, partial_score=1.0), shaped, evaluation=False) == 0


def test_a_shaped_sample_keeps_taus_reward_and_metrics_use_it():
    config = TauConfig(reward_shaping=0.5)
    sample = RolloutSample(prompt=0, metadata={"benchmark": "tau2", "domain": "retail", "task_id": "7"})
    fill_sample(
        None, sample, finish(_result(TerminationReason.USER_STOP, 0.0, partial_score=0.6), FakeTokenizer()), config
    )
    assert sample.reward == 0.3 and sample.metadata["task_reward"] == 0.0
    metrics = episode_metrics([sample], "p/", with_pass_k=True)
    assert metrics["p/tau2/retail/reward_mean"] == 0.0 and metrics["p/tau2/retail/pass^1"] == 0.0


def test_a_failed_sample_names_the_endpoint_its_error_blames_as_a_typed_field():
    config = TauConfig()
    for exc, endpoint in [
        (MissingSettingError("no policy server: set tau_policy_url"), FailedEndpoint.CONFIG),
        (PolicyConnectionError("cannot reach http://router"), FailedEndpoint.POLICY),
        (UserSimulatorError("user simulator is down"), FailedEndpoint.USER),
        (JudgeError("judge is down"), FailedEndpoint.JUDGE),
        (RuntimeError("a bug"), FailedEndpoint.ENV),
    ]:
        result = failed_result(config, exc)
        assert result.failed_endpoint is endpoint
        sample = RolloutSample(prompt=0, metadata={})
        fill_sample(None, sample, finish(result, FakeTokenizer()), config)
        assert sample.metadata["failed_endpoint"] == endpoint.value
        assert failure_endpoint(sample) == endpoint.value
    completed = RolloutSample(prompt=0, metadata={})
    fill_sample(None, completed, finish(_result(TerminationReason.USER_STOP, 1.0), FakeTokenizer()), config)
    assert "failed_endpoint" not in completed.metadata
