"""The episode's failure boundary (``loop/boundary.play_episode``): what each failure becomes, with real resources
(Qwen2.5's tokenizer, τ²'s backend) and no server: a missing setting and a task the sample cannot name are FAILED
results, a present but unusable setting is the one ``ConfigError``."""

from __future__ import annotations

import asyncio
import logging

import pytest

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.request import EpisodeRequest
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.errors import ConfigError, FailedEndpoint
from slime_tau_plugin.engine.loop.boundary import play_episode
from tests.conftest import require_sglang_parsers

SAMPLING = {"temperature": 1.0, "max_new_tokens": 16}
TASK = TaskRef("tau2", "retail", "train", "0")
REQUEST = EpisodeRequest("boundary-test", None, {}, SAMPLING)


def _never() -> TaskRef:
    raise AssertionError("the task is not looked up when the resources cannot be built")


def test_a_missing_policy_url_is_a_failed_result_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    config = TauConfig(tokenizer_path="/nonexistent/missing-url-check")
    first = asyncio.run(play_episode(config, REQUEST, task=_never))  # logs the line, unless an earlier test did
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="slime_tau_plugin.engine.loop.boundary"):
        second = asyncio.run(play_episode(config, REQUEST, task=_never))
    assert first.resources is None and first.tokenizer is None
    assert first.result.termination.is_failure and first.result.failed_endpoint is FailedEndpoint.CONFIG
    assert second.result.termination is first.result.termination
    assert "every sample is FAILED" not in caplog.text  # once per process, not once per sample


def test_an_unusable_tokenizer_path_is_raised_naming_the_key(tmp_path) -> None:
    config = TauConfig(policy_url="http://127.0.0.1:9", tokenizer_path=str(tmp_path / "no-tokenizer-here"))
    with pytest.raises(ConfigError, match="tokenizer"):
        asyncio.run(play_episode(config, REQUEST, task=_never))


def test_a_task_the_sample_cannot_name_is_a_failed_result(qwen25_dir: str) -> None:
    require_sglang_parsers()
    config = TauConfig(policy_url="http://127.0.0.1:9", tokenizer_path=qwen25_dir)

    def unknown_domain() -> TaskRef:
        raise ConfigError("tau_domain='nowhere' is not a domain of tau2")

    played = asyncio.run(play_episode(config, REQUEST, task=unknown_domain))
    assert played.resources is not None and played.tokenizer is not None
    assert played.result.termination.is_failure and "nowhere" in (played.result.error or "")
    assert played.result.termination is not TerminationReason.ABORTED
