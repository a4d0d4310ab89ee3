"""The episode loop in milliseconds: every TerminationReason, the budget edges and malformed tool calls.

``TrainableToolCallingAgent`` runs for real with the real ``ScriptedUser``, ``ChatTemplate``, ``Trajectory``
and SGLang's ``qwen25`` parser; only the policy, the τ environment and the tokenizer are fakes
(``tests/fakes.py``). Every episode is checked for the trajectory invariants (docs/ARCHITECTURE.md, Invariants)
and the shape of its frozen ``EpisodeResult`` by :func:`play`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import slime_tau_plugin
from slime_tau_plugin.engine.agent import TrainableAgentMixin, TrainableToolCallingAgent
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs.base import EnvSession, EnvToolCall, GoldAction, TaskRef
from slime_tau_plugin.engine.episode.result import EpisodeCounters, EpisodeResult, SampleStatus
from slime_tau_plugin.engine.episode.result import TerminationReason as Reason
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import (
    ContextLengthError,
    PolicyConnectionError,
    PolicyHTTPError,
    PolicyProtocolError,
)
from slime_tau_plugin.engine.loop.run import EpisodeEngine
from slime_tau_plugin.engine.policy.client import FinishReason
from slime_tau_plugin.engine.users.simulators import ScriptedUser
from tests.conftest import require_sglang_parsers
from tests.fakes import (
    FAKE_ENV_INFO,
    FAKE_INSTRUCTION,
    FAKE_TOOLS,
    EnvFaults,
    FakeEnvBackend,
    FakeEnvSession,
    FakePolicy,
    FakeTokenizer,
    FakeTurn,
    PolicyRequest,
    fake_logprob,
)

require_sglang_parsers()

REF = TaskRef("tau2", "retail", "train", "fake-0")
SAMPLING = {"max_new_tokens": 256, "temperature": 0.7}
HEADERS = {"X-SMG-Routing-Key": "ep"}
NO_FAULTS = EnvFaults()


def call(name: str, **arguments: str) -> str:
    """A model turn in the qwen25 tool-call format."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


GET_1 = call("get_order", order_id="#1")
CANCEL_1 = call("cancel_order", order_id="#1")
TRANSFER = call("transfer_to_human_agents", summary="cancelled #1")
DONE = "Your order #1 is cancelled."
EOT = 2  # FakeTokenizer's <|im_end|>


@dataclasses.dataclass
class Run:
    """One finished episode with everything the fakes saw."""

    result: EpisodeResult
    policy: FakePolicy
    session: FakeEnvSession | None
    tokenizer: FakeTokenizer

    @property
    def requests(self) -> list[PolicyRequest]:
        return self.policy.requests

    @property
    def trajectory(self) -> Trajectory:
        assert self.result.trajectory is not None
        return self.result.trajectory

    def max_new(self) -> list[int]:
        return [r.sampling_params["max_new_tokens"] for r in self.requests]

    def continuations(self) -> list[str]:
        """The text of every mask-0 segment, in order."""
        return [self.tokenizer.decode(s.ids) for s in self.trajectory.segments if not s.is_trainable]

    def assert_outcome(self, reason: Reason, status: SampleStatus, counters: EpisodeCounters, reward: float) -> None:
        assert self.result.termination is reason
        assert reason.status is status
        assert self.result.counters == counters
        assert self.result.reward == reward


def play(
    turns: Sequence[FakeTurn | str],
    *,
    faults: EnvFaults = NO_FAULTS,
    sampling: dict[str, Any] = SAMPLING,
    context_len: int | None = None,
    abort_when: Callable[[FakePolicy], bool] | None = None,
    template: str = "chatml",
    **config: Any,
) -> Run:
    """Play one episode and check what must hold for any episode."""
    tokenizer = FakeTokenizer(template)
    policy = FakePolicy(tokenizer, turns, context_len)
    backend = FakeEnvBackend(faults)
    agent = TrainableToolCallingAgent(TauConfig(**config), policy, tokenizer, backend)
    should_abort = None if abort_when is None else (lambda: abort_when(policy))
    given = copy.deepcopy(sampling)
    result = asyncio.run(agent.run_episode(REF, sampling, session_id="ep", headers=HEADERS, should_abort=should_abort))
    assert sampling == given, "the caller's sampling_params are never mutated"
    run = Run(result, policy, backend.sessions[-1] if backend.sessions else None, tokenizer)
    _check_result(run)
    return run


def _check_result(run: Run) -> None:
    r = run.result
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.reward = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.counters.tool_calls = 99  # type: ignore[misc]
    assert r.task == REF and r.env_info == FAKE_ENV_INFO
    assert r.tools == (tuple(FAKE_TOOLS) if run.session is not None else ())
    t = r.timings
    assert min(t.policy_s, t.env_s, t.user_s, t.total_s) >= 0.0
    assert t.policy_s + t.env_s + t.user_s <= t.total_s + 1e-6, "the timed parts do not overlap"
    assert r.num_turns == sum(req.result is not None for req in run.requests)
    assert [req.rid for req in run.requests] == [f"ep-{i}" for i in range(len(run.requests))]
    assert all(req.headers == HEADERS for req in run.requests)
    if r.termination.is_failure:
        assert r.error and r.reward == 0.0 and r.reward_info == {}
    if not r.termination.is_scored:
        assert r.reward == 0.0
    if run.session is not None:
        calls = run.session.reward_calls
        if r.termination is Reason.ABORTED or r.termination.is_failure:
            assert all(c is not Reason.ABORTED and not c.is_failure for c in calls), "no reward for these"
        else:
            assert calls == [r.termination], "the reward is computed once, for the episode's own end"
    if r.trajectory is None:
        assert not run.requests, "no prompt, no request"
    else:
        _check_trajectory(r.trajectory, run.requests)


def _check_trajectory(traj: Trajectory, requests: list[PolicyRequest]) -> None:
    """Request i+1 sends request i's ids + its output + one continuation; mask 1 exactly on sampled ids."""
    segments = list(traj.segments)
    held = list(traj.prompt_ids)
    for req in requests:
        assert list(req.input_ids) == held, "each request sends exactly the ids held so far"
        if req.result is None:
            assert req is requests[-1], "a failed request ends the episode"
            break
        if req.result.output_ids:
            seg = segments.pop(0)
            assert seg.is_trainable and seg.ids == req.result.output_ids and seg.log_probs == req.result.log_probs
            held += seg.ids
        if segments and not segments[0].is_trainable:
            seg = segments.pop(0)
            assert seg.ids and set(seg.log_probs) == {0.0}
            held += seg.ids
    assert segments == [], "the trajectory holds model turns and their continuations, nothing else"
    assert traj.ids == held
    mask, log_probs, response = traj.loss_mask, traj.rollout_log_probs, traj.response_ids
    assert len(mask) == len(log_probs) == len(response) == traj.response_length
    assert sum(mask) == sum(len(r.result.output_ids) for r in requests if r.result is not None)
    start = len(traj.prompt_ids)
    for i, (m, lp, token) in enumerate(zip(mask, log_probs, response, strict=True)):
        assert lp == (fake_logprob(token, start + i) if m else 0.0), f"response position {i}"


# --- episodes the user or a tool ends (scored) --------------------------------------------------------------


def test_user_stop_after_the_task_is_done_earns_the_reward() -> None:
    run = play([CANCEL_1, DONE])
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=1), 1.0)
    assert run.result.reward_info == {"db": 1.0, "scored": True}
    assert run.session.steps == [EnvToolCall("cancel_order", {"order_id": "#1"}, "call-1-0")]
    assert run.session.reward_calls == [Reason.USER_STOP]
    opening = FAKE_INSTRUCTION
    assert run.session.recorded == [("user", opening), ("assistant", DONE)]
    assert [m["role"] for m in run.result.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert run.result.messages[1]["content"] == opening
    assert run.result.messages[-1]["content"] == DONE
    assert run.trajectory.segments[-1].is_trainable, "the stopped episode ends on the model's turn"


def test_the_scripted_user_opens_with_the_bare_instruction() -> None:
    run = play([CANCEL_1, DONE])
    assert run.session.recorded[0] == ("user", FAKE_INSTRUCTION)
    assert run.result.messages[1]["content"] == FAKE_INSTRUCTION
    assert "Ticket" not in run.tokenizer.decode(run.trajectory.prompt_ids)


def test_scripted_user_answers_n_times_then_stops_the_episode() -> None:
    run = play(["Anything else?", "Still there?", "Bye."], scripted_user_replies=2)
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(), 0.0)
    users = [m["content"] for m in run.result.messages if m["role"] == "user"][1:]
    assert users == [ScriptedUser.CONTINUE, ScriptedUser.CONTINUE]
    assert len(run.requests) == 3 and run.session.steps == []


def test_terminating_tool_is_agent_stop_and_scored() -> None:
    run = play([CANCEL_1, TRANSFER])
    run.assert_outcome(Reason.AGENT_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=2), 1.0)
    assert [s.name for s in run.session.steps] == ["cancel_order", "transfer_to_human_agents"]
    assert run.session.reward_calls == [Reason.AGENT_STOP]


def test_terminating_call_skips_the_rest_of_its_turn() -> None:
    run = play([f"{TRANSFER}\n{GET_1}"])
    run.assert_outcome(Reason.AGENT_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=1), 0.0)
    assert [s.name for s in run.session.steps] == ["transfer_to_human_agents"]


def test_continuations_are_rendered_and_tokenized_off_the_event_loop() -> None:
    """slime's loop serves every episode: a turn's continuation (render + tokenize) runs in a worker thread."""

    class ThreadNotingTokenizer(FakeTokenizer):
        def __init__(self) -> None:
            super().__init__("chatml")
            self.render_threads: list[int] = []
            self.watching = False

        def apply_chat_template(self, messages, *args, **kwargs):
            if self.watching and any(m.get("role") == "tool" for m in messages):  # a continuation (or a probe)
                self.render_threads.append(threading.get_ident())
            return super().apply_chat_template(messages, *args, **kwargs)

    tokenizer = ThreadNotingTokenizer()
    agent = TrainableToolCallingAgent(TauConfig(), FakePolicy(tokenizer, [CANCEL_1, DONE]), tokenizer, FakeEnvBackend())

    async def episode() -> tuple[EpisodeResult, int]:
        tokenizer.watching = True
        return await agent.run_episode(REF, SAMPLING), threading.get_ident()

    result, loop_thread = asyncio.run(episode())
    assert result.termination is Reason.USER_STOP
    assert tokenizer.render_threads and loop_thread not in tokenizer.render_threads


# --- tool calls: several per turn, error results, malformed and unknown calls ------------------------------


def test_two_calls_in_one_turn_give_two_tool_messages_in_one_user_turn() -> None:
    run = play([f"{GET_1}\n{call('get_order', order_id='#2')}", DONE])
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=2), 0.0)
    assert [c.call_id for c in run.session.steps] == ["call-1-0", "call-1-1"]
    tools = [m for m in run.result.messages if m["role"] == "tool"]
    assert [(m["name"], json.loads(m["content"])["item"]) for m in tools] == [
        ("get_order", "lamp"),
        ("get_order", "desk"),
    ]
    (continuation,) = run.continuations()
    assert continuation.count("<tool_response>") == 2 and continuation.count("<|im_start|>user") == 1
    assert continuation.endswith("<|im_start|>assistant\n")


def test_tool_error_result_is_fed_back_and_the_episode_goes_on() -> None:
    run = play([call("get_order", order_id="#9"), DONE])
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=1, tool_errors=1), 0.0)
    assert run.result.messages[3] == {"role": "tool", "name": "get_order", "content": "Error: order '#9' not found"}
    assert "Error: order '#9' not found" in run.continuations()[0]


def test_malformed_json_is_fed_back_as_an_error_and_counted() -> None:
    broken = '<tool_call>\n{"name": "cancel_order", "arguments": {"order_id": \n</tool_call>'
    run = play([broken, CANCEL_1, DONE])
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=1, parse_errors=1), 1.0)
    assert run.result.messages[3]["role"] == "tool"
    assert run.result.messages[3]["content"].startswith("Error: a tool call is not valid JSON")
    assert "<tool_response>\nError: a tool call is not valid JSON" in run.continuations()[0]
    assert [s.name for s in run.session.steps] == ["cancel_order"], "the broken call never reached the env"


def test_unknown_tool_is_fed_back_with_the_available_tools_and_counted() -> None:
    run = play([call("refund_everything"), DONE])
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(parse_errors=1), 0.0)
    assert run.result.messages[3]["content"] == (
        "Error: unknown tool 'refund_everything'; available tools: get_order, cancel_order, transfer_to_human_agents"
    )
    assert run.session.steps == []


def test_turn_stopped_without_end_of_turn_is_closed_at_mask_zero() -> None:
    run = play([FakeTurn(GET_1, is_closed=False), DONE])
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=1), 0.0)
    first, continuation = run.trajectory.segments[:2]
    assert first.ids[-1] != EOT and continuation.ids[0] == EOT and not continuation.is_trainable


def test_unprovable_continuation_falls_back_and_is_counted() -> None:
    run = play([GET_1, DONE], template="text_eot")
    run.assert_outcome(
        Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(tool_calls=1, template_fallbacks=1), 0.0
    )


# --- truncation: turns, length, budgets, context --------------------------------------------------------------


def test_max_turns_truncates_after_the_last_continuation() -> None:
    run = play([GET_1, GET_1], max_turns=2)
    run.assert_outcome(Reason.MAX_TURNS, SampleStatus.TRUNCATED, EpisodeCounters(tool_calls=2), 0.0)
    assert run.session.reward_calls == [Reason.MAX_TURNS]
    assert not run.trajectory.segments[-1].is_trainable


def test_reply_cut_at_max_new_tokens_is_length() -> None:
    run = play(["A long answer that does not fit in eight tokens."], sampling={"max_new_tokens": 8})
    run.assert_outcome(Reason.LENGTH, SampleStatus.TRUNCATED, EpisodeCounters(), 0.0)
    (request,) = run.requests
    assert request.result.finish_reason is FinishReason.LENGTH and len(request.result.output_ids) == 8
    assert run.result.messages[-1] == {"role": "assistant", "content": "A long an"}  # "lo" is one id
    assert run.session.reward_calls == [Reason.LENGTH]


@pytest.mark.parametrize(
    ("per_turn", "slime_max_new", "expected"),
    [(None, 40, 40), (12, 40, 12), (60, 40, 40), (12, None, 12)],
    ids=["slime", "tau-tighter", "slime-tighter", "tau-alone"],
)
def test_per_turn_cap_is_the_tighter_of_tau_max_tokens_per_turn_and_slimes_max_new_tokens(
    per_turn, slime_max_new, expected
) -> None:
    sampling = {"temperature": 0.7, "top_p": 0.9}
    if slime_max_new is not None:
        sampling["max_new_tokens"] = slime_max_new
    run = play(["Hi.", "Bye."], sampling=sampling, max_tokens_per_turn=per_turn, scripted_user_replies=1)
    assert run.result.termination is Reason.USER_STOP and run.max_new() == [expected, expected]
    assert all({**r.sampling_params, "max_new_tokens": 0} == {**sampling, "max_new_tokens": 0} for r in run.requests)


def test_without_any_per_turn_cap_a_turn_may_fill_the_context() -> None:
    run = play([GET_1, DONE], sampling={"temperature": 0.7}, max_context_len=4096)
    assert run.max_new() == [4096 - len(r.input_ids) for r in run.requests]


@pytest.fixture(scope="module")
def lengths() -> tuple[int, int]:
    """(prompt ids, ids held at the second request) of the episode ``[GET_1, DONE]``."""
    run = play([GET_1, DONE])
    return len(run.requests[0].input_ids), len(run.requests[1].input_ids)


def test_prompt_that_fills_the_context_is_budget_before_any_request(lengths) -> None:
    prompt, _ = lengths
    run = play([GET_1], max_context_len=prompt)
    run.assert_outcome(Reason.BUDGET, SampleStatus.TRUNCATED, EpisodeCounters(), 0.0)
    assert run.requests == [] and run.result.num_turns == 0
    assert run.trajectory.response_length == 0 and run.session.reward_calls == [Reason.BUDGET]


def test_one_free_context_slot_asks_for_exactly_one_token(lengths) -> None:
    prompt, _ = lengths
    run = play([GET_1], max_context_len=prompt + 1)
    run.assert_outcome(Reason.LENGTH, SampleStatus.TRUNCATED, EpisodeCounters(), 0.0)
    assert run.max_new() == [1] and len(run.trajectory) == prompt + 1


@pytest.mark.parametrize("limit", ["max_context_len", "max_response_len"])
def test_continuation_that_leaves_no_room_for_a_token_is_budget(lengths, limit) -> None:
    prompt, held = lengths
    run = play([GET_1, DONE], **{limit: held if limit == "max_context_len" else held - prompt})
    run.assert_outcome(Reason.BUDGET, SampleStatus.TRUNCATED, EpisodeCounters(tool_calls=1), 0.0)
    assert len(run.requests) == 1 and run.trajectory.segments[-1].is_trainable, "no continuation was appended"
    assert run.result.messages[-1]["role"] == "assistant"
    assert run.session.reward_calls == [Reason.BUDGET]


@pytest.mark.parametrize("limit", ["max_context_len", "max_response_len"])
def test_continuation_with_one_slot_left_goes_on_with_one_token(lengths, limit) -> None:
    prompt, held = lengths
    run = play([GET_1, DONE], **{limit: held + 1 if limit == "max_context_len" else held - prompt + 1})
    run.assert_outcome(Reason.LENGTH, SampleStatus.TRUNCATED, EpisodeCounters(tool_calls=1), 0.0)
    assert run.max_new() == [held + 1 - prompt, 1] and len(run.requests[1].input_ids) == held


def test_response_budget_caps_the_first_turn_too() -> None:
    run = play([GET_1], max_response_len=3)
    assert run.max_new() == [3] and run.result.termination is Reason.LENGTH


def test_server_context_error_is_context_length_and_still_scored() -> None:
    error = ContextLengthError("prompt too long for the context window", status=400, body="")
    run = play([GET_1, FakeTurn(error=error)])
    run.assert_outcome(Reason.CONTEXT_LENGTH, SampleStatus.TRUNCATED, EpisodeCounters(tool_calls=1), 0.0)
    assert run.result.error == str(error) and run.result.num_turns == 1
    assert run.session.reward_calls == [Reason.CONTEXT_LENGTH]


def test_model_context_smaller_than_the_configured_one_is_context_length(lengths) -> None:
    prompt, _ = lengths
    run = play([GET_1, DONE], context_len=prompt + 256)
    run.assert_outcome(Reason.CONTEXT_LENGTH, SampleStatus.TRUNCATED, EpisodeCounters(tool_calls=1), 0.0)
    assert len(run.requests) == 2 and run.requests[1].result is None
    assert "exceeds the context length" in run.result.error


# --- aborts -------------------------------------------------------------------------------------------------


def test_engine_abort_keeps_the_partial_turn_and_computes_no_reward() -> None:
    run = play([GET_1, FakeTurn("Let me ch", finish=FinishReason.ABORT)])
    run.assert_outcome(Reason.ABORTED, SampleStatus.ABORTED, EpisodeCounters(tool_calls=1), 0.0)
    assert run.tokenizer.decode(run.trajectory.segments[-1].ids) == "Let me ch"
    assert run.result.messages[-1]["role"] == "tool", "the aborted text is not a message"
    assert run.session.reward_calls == []


def test_should_abort_between_turns_stops_before_the_next_request() -> None:
    run = play([GET_1, DONE], abort_when=lambda policy: len(policy.requests) == 1)
    run.assert_outcome(Reason.ABORTED, SampleStatus.ABORTED, EpisodeCounters(tool_calls=1), 0.0)
    assert len(run.requests) == 1, "no request after the abort"
    assert run.session.reward_calls == [] and not run.trajectory.segments[-1].is_trainable


def test_should_abort_before_the_first_turn_makes_no_request() -> None:
    run = play([GET_1], abort_when=lambda policy: True)
    run.assert_outcome(Reason.ABORTED, SampleStatus.ABORTED, EpisodeCounters(), 0.0)
    assert run.requests == [] and run.trajectory.response_length == 0 and run.session.reward_calls == []


# --- external failures: FAILED, no reward ---------------------------------------------------------------------


def test_exception_inside_a_tool_step_is_env_error() -> None:
    run = play([GET_1, CANCEL_1, DONE], faults=EnvFaults(raising_tool="cancel_order"))
    run.assert_outcome(Reason.ENV_ERROR, SampleStatus.FAILED, EpisodeCounters(tool_calls=2), 0.0)
    assert "RuntimeError: database locked during cancel_order" in run.result.error
    assert len(run.requests) == 2 and run.session.reward_calls == []


def test_step_slower_than_the_env_timeout_is_env_error() -> None:
    # The timeout covers every env call (reset, tooling): 1 s leaves them room on a loaded box.
    run = play([GET_1], faults=EnvFaults(step_delay_s=3.0), env_timeout_s=1.0)
    run.assert_outcome(Reason.ENV_ERROR, SampleStatus.FAILED, EpisodeCounters(tool_calls=1), 0.0)
    assert "timed out after 1.0s" in run.result.error
    assert run.result.timings.env_s >= 1.0 and run.result.timings.total_s < 3.0


def test_slow_step_within_the_timeout_is_timed_as_env_time() -> None:
    run = play([GET_1, DONE], faults=EnvFaults(step_delay_s=0.02))
    assert run.result.termination is Reason.USER_STOP and run.result.timings.env_s >= 0.02


def test_reward_that_raises_is_env_error() -> None:
    run = play([DONE], faults=EnvFaults(reward_raises=True))
    run.assert_outcome(Reason.ENV_ERROR, SampleStatus.FAILED, EpisodeCounters(), 0.0)
    assert "RuntimeError: evaluator crashed" in run.result.error
    assert run.session.reward_calls == [Reason.USER_STOP]


def test_env_that_cannot_open_is_env_error_without_a_trajectory() -> None:
    run = play([DONE], faults=EnvFaults(open_raises=True))
    run.assert_outcome(Reason.ENV_ERROR, SampleStatus.FAILED, EpisodeCounters(), 0.0)
    assert run.result.trajectory is None and run.session is None and run.requests == []


def test_env_that_fails_to_record_a_message_is_env_error() -> None:
    run = play([DONE], faults=EnvFaults(record_raises=True))
    run.assert_outcome(Reason.ENV_ERROR, SampleStatus.FAILED, EpisodeCounters(), 0.0)


def test_user_side_tool_that_raises_is_env_error() -> None:
    reboot = GoldAction("reboot_device", {}, requestor="user")
    run = play(["Please reboot your phone."], faults=EnvFaults(raising_tool="reboot_device", user_actions=(reboot,)))
    run.assert_outcome(Reason.ENV_ERROR, SampleStatus.FAILED, EpisodeCounters(), 0.0)
    assert [c.name for c in run.session.user_steps] == ["reboot_device"]


def test_user_side_action_is_carried_out_by_the_scripted_user() -> None:
    reboot = GoldAction("reboot_device", {}, requestor="user")
    run = play(["Please reboot your phone.", DONE], faults=EnvFaults(user_actions=(reboot,)))
    run.assert_outcome(Reason.USER_STOP, SampleStatus.COMPLETED, EpisodeCounters(), 0.0)
    assert run.result.messages[3] == {
        "role": "user",
        "content": "I did reboot_device as you asked. Result: device rebooted",
    }


def test_user_that_fails_at_the_start_is_user_error_without_a_trajectory() -> None:
    run = play([DONE], faults=EnvFaults(script_raises=True))
    run.assert_outcome(Reason.USER_ERROR, SampleStatus.FAILED, EpisodeCounters(), 0.0)
    assert "UserSimulatorError" in run.result.error and "task script is corrupt" in run.result.error
    assert run.result.trajectory is None and run.requests == []


def test_user_that_fails_mid_episode_is_user_error() -> None:
    malformed = GoldAction("reboot_device", None, requestor="user")  # type: ignore[arg-type]
    run = play(["Please reboot your phone."], faults=EnvFaults(user_actions=(malformed,)))
    run.assert_outcome(Reason.USER_ERROR, SampleStatus.FAILED, EpisodeCounters(), 0.0)
    assert run.result.error.startswith("UserSimulatorError: user simulator failed: TypeError")
    assert len(run.requests) == 1 and run.session.user_steps == [] and run.session.reward_calls == []


@pytest.mark.parametrize(
    "error",
    [
        PolicyConnectionError("connection refused after 4 tries"),
        PolicyHTTPError("POST /generate answered 503", status=503, body=""),
        PolicyProtocolError("/generate body has no meta_info"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_policy_failure_is_policy_error(error) -> None:
    run = play([GET_1, FakeTurn(error=error)])
    run.assert_outcome(Reason.POLICY_ERROR, SampleStatus.FAILED, EpisodeCounters(tool_calls=1), 0.0)
    assert run.result.error == f"{type(error).__name__}: {error}"
    assert run.result.num_turns == 1 and run.session.reward_calls == []


# --- names ------------------------------------------------------------------------------------------


def test_the_published_engine_name_is_the_engine_itself() -> None:
    assert TrainableAgentMixin is EpisodeEngine is slime_tau_plugin.TrainableAgentMixin
    assert issubclass(TrainableToolCallingAgent, TrainableAgentMixin)


def test_a_session_without_user_tools_shares_no_mutable_default() -> None:
    assert EnvSession.user_tools == () and isinstance(EnvSession.user_tools, tuple)
