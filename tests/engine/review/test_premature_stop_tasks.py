"""The premature stop on τ's real tasks (issue 40 §3): the required writes are τ's own, the agent's and the customer's.

Each case opens a real τ session (τ² telecom, τ² retail, τ-bench v1 retail) and reads its required writes from
τ's classification; the customer's device actions are real ``user_step`` calls on τ²'s telecom user tools. The
last test plays a telecom task through ``generate``: the oracle policy over real HTTP, a customer on the chat user
server that stops instead of doing on its phone what the oracle asked.
"""

from __future__ import annotations

import asyncio

import pytest

from slime_tau_plugin.engine.envs.base import EnvSession, EnvToolCall
from slime_tau_plugin.engine.review.checks import ReviewInput, run_checks
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag, Severity

TELECOM_USER_ONLY = 3
"""τ² telecom test task at this position: only the customer's writes (airplane mode, network mode, data, data
saver), and the oracle passes it with a customer that acts."""
ASK_ROAMING = "Please go to Settings > Mobile Network and turn Data Roaming on, then let me know what you see."


def review_of(
    session: EnvSession,
    last_agent: str,
    stop: str | None,
    *,
    agent_calls: tuple[str, ...] = (),
    user_calls: tuple[str, ...] = (),
    reward: float = 0.0,
) -> ReviewInput:
    messages = (
        {"role": "system", "content": "policy"},
        {"role": "user", "content": session.script.user_instructions},
        {"role": "assistant", "content": last_agent},
    )
    return ReviewInput(
        session.script.user_instructions,
        messages,
        reward,
        first_index=1,
        stop=stop,
        required_writes=session.required_writes(),
        agent_calls=agent_calls,
        required_user_writes=session.required_user_writes(),
        user_calls=user_calls,
    )


def act(session: EnvSession, *names: str) -> tuple[str, ...]:
    """The customer runs ``names`` on its phone (τ²'s own user tools); returns the calls as the review reads them."""
    for i, name in enumerate(names):
        assert not session.user_step(EnvToolCall(name, {}, f"user-{i}")).is_error
    return names


@pytest.fixture
def telecom(tau2_backend) -> EnvSession:
    ref = tau2_backend.task_refs("telecom", "test")[0]  # the customer's data saver and roaming; no agent write
    return tau2_backend.open(ref)


def test_the_customers_own_writes_are_taus_device_fixes(telecom) -> None:
    assert telecom.required_writes() == ()
    assert telecom.required_user_writes() == ("toggle_data_saver_mode", "toggle_roaming")


def test_a_customer_that_stops_instead_of_acting_on_its_phone_is_a_premature_stop(telecom) -> None:
    done = act(telecom, "toggle_data_saver_mode")
    (finding,) = run_checks(review_of(telecom, ASK_ROAMING, "I don't have time for this. ###STOP###", user_calls=done))
    assert finding.check is ReviewCheck.PREMATURE_STOP and finding.severity is Severity.CRITICAL_HINDERED
    assert "on its own device" in finding.detail and "toggle_roaming (the customer's own)" in finding.detail
    assert "toggle_data_saver_mode" not in finding.detail  # that one it did
    assert finding.tags == (ReviewTag.PREMATURE_TERMINATION, ReviewTag.MISSED_REQUIRED_ACTION)


def test_a_transfer_request_in_place_of_the_device_action_counts_too(telecom) -> None:
    (finding,) = run_checks(review_of(telecom, "Could you restart your phone?", "###TRANSFER###"))
    assert "toggle_data_saver_mode" in finding.detail and "toggle_roaming" in finding.detail


@pytest.mark.parametrize(
    ("last_agent", "acts", "reward"),
    [
        ("Is there anything else I can help you with?", (), 0.0),  # the agent gave up: its failure
        ("I'm unable to fix this; I'll note it on your account. Goodbye.", (), 0.0),
        (ASK_ROAMING, ("toggle_data_saver_mode", "toggle_roaming"), 0.0),  # everything required happened
        (ASK_ROAMING, ("toggle_data_saver_mode",), 1.0),  # passed: τ's outcome reached by another path
    ],
)
def test_stops_the_customer_is_not_to_blame_for_are_not_flagged(telecom, last_agent, acts, reward) -> None:
    done = act(telecom, *acts)
    assert run_checks(review_of(telecom, last_agent, "###STOP###", user_calls=done, reward=reward)) == []


@pytest.mark.parametrize("benchmark", ["tau2", "tau1"])
def test_297_a_stop_right_after_the_agent_asked_for_confirmation_in_retail(benchmark) -> None:
    from slime_tau_plugin.engine.envs import get_backend

    pytest.importorskip("tau2" if benchmark == "tau2" else "tau_bench")
    backend = get_backend(benchmark)
    session = next(s for s in map(backend.open, backend.task_refs("retail", "test")) if s.required_writes())
    write = session.required_writes()[0]
    confirm = f"I'm ready to do this for you ({write}). Do you want me to proceed? (yes/no)"
    (finding,) = run_checks(review_of(session, confirm, "Yes please! ###STOP###"))
    assert "#297" in finding.detail and write in finding.detail
    assert finding.severity is Severity.CRITICAL_HINDERED
    # the write was tried and τ refused it: the agent then asks something else; the failure is the agent's
    tried = tuple(session.required_writes())
    unrelated = review_of(session, "Would you like to hear about our offers?", "###STOP###", agent_calls=tried)
    assert run_checks(unrelated) == []


def test_297_in_telecom_an_agent_write_waits_on_the_confirmation(tau2_backend) -> None:
    ref = tau2_backend.task_refs("telecom", "test")[1]  # the agent's enable_roaming after the customer's fixes
    session = tau2_backend.open(ref)
    assert session.required_writes() == ("enable_roaming",)
    done = act(session, *session.required_user_writes())
    confirm = "I can enable roaming on line L1002 for you. Shall I go ahead?"
    (finding,) = run_checks(review_of(session, confirm, "###STOP###", user_calls=done))
    assert "without giving it" in finding.detail and "enable_roaming" in finding.detail
    assert "the customer's own" not in finding.detail and finding.tags == (ReviewTag.PREMATURE_TERMINATION,)


def test_a_task_scored_on_its_actions_requires_the_agents_transfer(tau2_backend) -> None:
    """τ² telecom's unfixable-line tasks are scored on ``ACTION``: the agent must transfer to a human. A customer
    that stops while the agent still asks it to check its phone costs that transfer."""
    ref = next(r for r in tau2_backend.task_refs("telecom", "test") if "contract_end_suspension" in r.task_id)
    session = tau2_backend.open(ref)
    assert session.required_writes() == ("transfer_to_human_agents",)  # τ²'s GENERIC tool, required by ACTION
    ask = "Could you check your network status and tell me what it shows?"
    (finding,) = run_checks(review_of(session, ask, "Forget it, I'll figure it out myself. ###STOP###"))
    assert "transfer_to_human_agents" in finding.detail and "waited on its answer" in finding.detail


def play_telecom(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, stop_at: int | None):
    """The oracle on telecom test task :data:`TELECOM_USER_ONLY`; the customer acts on the oracle's requests, or
    answers the ``stop_at``-th with a stop."""
    from slime_tau_plugin.adapters.slime.generate import generate
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply
    from slime_tau_plugin.tools.servers.fake_models import ASK_USER
    from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples
    from tests.slime_args import slime_args

    asked = []

    def reply(messages, tools):
        if messages[-1].get("role") == "user" and ASK_USER in str(messages[-1].get("content")):
            asked.append(messages[-1]["content"])
            if len(asked) == stop_at:
                return {"role": "assistant", "content": "This is taking forever, forget it. ###STOP###"}
        return scripted_user_reply(messages, tools, 2)

    policy = oracle_server_factory(qwen25, (("telecom", "test"),))
    user = ChatUserServer(reply=reply).start()
    try:
        args = slime_args(
            policy,
            qwen25_dir,
            tau_user="llm",
            tau_user_base_url=user.base_url,
            tau_user_model="scripted-user",
            tau_max_turns=20,
        )
        sample = make_samples(tau2_backend, "telecom", "test", TELECOM_USER_ONLY + 1)[TELECOM_USER_ONLY]
        asyncio.run(generate(args, sample, SAMPLING))
    finally:
        user.stop()
    return sample


def test_in_generate_a_stop_before_the_customers_own_write_leaves_training(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory
) -> None:
    clean = play_telecom(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, None)
    assert clean.reward == 1.0 and clean.metadata["tau_review"]["findings"] == []
    sample = play_telecom(tau2_backend, qwen25, qwen25_dir, oracle_server_factory, 2)
    meta = sample.metadata
    assert meta["termination_reason"] == "user_error" and sample.remove_sample and sum(sample.loss_mask) == 0
    review = meta["tau_review"]
    assert review["excluded"] and review["stop"] == "This is taking forever, forget it. ###STOP###"
    (finding,) = review["findings"]
    assert finding["check"] == "premature_stop" and finding["severity"] == "critical_hindered"
    assert "(the customer's own)" in finding["detail"] and finding["message_index"] == len(meta["messages"])
