"""Every value of :class:`FailedEndpoint` has its stop line, its drop reason and its metric (issue 34 §4).

An episode whose worker died twice ends with ``failed_endpoint: worker``; before, the failure guard had no words
for it and a group that FAILED on workers raised ``KeyError: 'worker'`` inside slime's rollout instead of the
guard's one-line stop. Each sample here is written the way ``generate`` writes it (``failed_result`` from the
error class that blames the endpoint, then ``fill_sample``), so a new enum value without its entries fails here.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.all_samples import ALL_PREFIX, all_samples_metrics
from slime_tau_plugin.adapters.slime.generate import fill_sample
from slime_tau_plugin.adapters.slime.group_filter import ENDPOINTS, FailureGuardError, keep_group, reset_guard
from slime_tau_plugin.engine import errors
from slime_tau_plugin.engine.config.review_settings import ReviewSettings
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.errors import FailedEndpoint, TauPluginError
from slime_tau_plugin.engine.loop.review import apply_verdict
from slime_tau_plugin.engine.outcome import failed_result
from slime_tau_plugin.engine.review.verdict import Finding, ReviewCheck, ReviewTag, Severity, Verdict
from slime_tau_plugin.engine.workers.play import finish
from tests.contracts.slime_sample import Sample
from tests.fakes.tokenizer import FakeTokenizer

GROUP = 4


def _error_blaming(endpoint: FailedEndpoint) -> TauPluginError:
    """An instance of the error tree's class that sets the blame on ``endpoint`` (every value has one)."""
    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, TauPluginError) and vars(cls).get("failed_endpoint") is endpoint:
            return cls(f"{endpoint.value} went away")
    raise AssertionError(f"no error class in errors.py blames {endpoint}")


def _customer_error(config: TauConfig) -> EpisodeResult:
    """The customer is blamed by no exception but by the review's verdict: a critical finding applied to an
    episode (``loop/review.apply_verdict``, what the loop calls at an episode's end)."""
    finding = Finding(ReviewCheck.INVENTED_IDENTIFIER, (ReviewTag.HALLUCINATION,), Severity.CRITICAL_HINDERED, 1, "x")
    verdict = Verdict((finding,), (ReviewCheck.INVENTED_IDENTIFIER,), reward=1.0)
    episode = replace(failed_result(config, TauPluginError("scored")), termination=TerminationReason.USER_STOP)
    return apply_verdict(episode, verdict, ReviewSettings.from_config(config))


def _failed_group(endpoint: FailedEndpoint) -> list[Sample]:
    config, group = TauConfig(), []
    for i in range(GROUP):
        sample = Sample(index=i, prompt=0, metadata={"benchmark": "tau2", "domain": "retail", "task_id": "3"})
        if endpoint is FailedEndpoint.CUSTOMER:
            result = _customer_error(config)
        else:
            result = failed_result(config, _error_blaming(endpoint))
        fill_sample(None, sample, finish(result, FakeTokenizer()), config)
        group.append(sample)
    return group


@pytest.fixture(autouse=True)
def fresh_guard():
    reset_guard()
    yield
    reset_guard()


@pytest.mark.parametrize("endpoint", list(FailedEndpoint), ids=lambda e: e.value)
def test_a_group_failed_on_any_endpoint_stops_with_the_guards_line_naming_it(endpoint: FailedEndpoint):
    group = _failed_group(endpoint)
    assert all(s.metadata["failed_endpoint"] == endpoint.value for s in group)
    args = SimpleNamespace(n_samples_per_prompt=GROUP, rollout_batch_size=1, reward_key=None)
    with pytest.raises(FailureGuardError) as info:
        keep_group(args, group)
    assert info.value.endpoint == endpoint.value
    assert str(info.value).startswith("slime_tau_plugin stopped the run: 4 of the last 4 episodes (1 groups) FAILED")
    last_error = (
        "CustomerError: the review found" if endpoint is FailedEndpoint.CUSTOMER else f"{endpoint.value} went away"
    )
    assert ENDPOINTS[endpoint.value] in str(info.value) and last_error in str(info.value)


@pytest.mark.parametrize("endpoint", list(FailedEndpoint), ids=lambda e: e.value)
def test_a_group_failed_on_any_endpoint_is_dropped_and_counted_by_its_name(endpoint: FailedEndpoint):
    group = _failed_group(endpoint)
    args = SimpleNamespace(
        n_samples_per_prompt=GROUP,
        rollout_batch_size=1,
        reward_key=None,
        tau_max_failed_share=1.0,
        tau_review_max_error_share=1.0,  # the customer's errors have a limit of their own
    )
    verdict = keep_group(args, group)  # a guard that never stops: slime's drop reason
    assert not verdict.keep and verdict.reason == f"failed_{endpoint.value}"
    metrics = all_samples_metrics([group])
    assert metrics[f"{ALL_PREFIX}tau2/retail/failed/{endpoint.value}"] == 1.0
    assert metrics[f"{ALL_PREFIX}groups/dropped_failed_{endpoint.value}"] == 1.0


def test_every_failure_cause_the_guard_can_name_has_its_words():
    assert {e.value for e in FailedEndpoint} <= set(ENDPOINTS)
