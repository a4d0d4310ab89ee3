"""The customer review's deterministic checks, its verdict's consequence, its metrics and its keys (issue 33)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.group_filter import FailureGuard, failure_endpoint, guard_settings
from slime_tau_plugin.engine.config.review_settings import ReviewSettings
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.episode.task_ref import TaskRef
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import ConfigError, FailedEndpoint
from slime_tau_plugin.engine.loop.review import apply_verdict
from slime_tau_plugin.engine.review.checks import GO_AHEAD, ReviewInput, run_checks
from slime_tau_plugin.engine.review.facts import FactKind, stated_facts
from slime_tau_plugin.engine.review.grounding import Grounding
from slime_tau_plugin.engine.review.metrics import is_customer_error, review_metrics
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag, Severity, Verdict
from slime_tau_plugin.engine.users.review_judge import is_selected, parse_answer
from slime_tau_plugin.reporting.failure_guard import FailureGuardError
from slime_tau_plugin.tools.cli.views.review_view import review_html, review_lines, review_summary_line

INSTRUCTIONS = (
    "You received your order #W2378156 and wish to exchange the mechanical keyboard. "
    "Known info: You are Yusuf Rossi in zip code 19122. Unknown info: You do not remember your email address."
)
CALL = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W5555555"}}\n</tool_call>'


def conversation(*customer: str, agent_calls: str = "") -> tuple[dict, ...]:
    messages = [{"role": "system", "content": "policy"}]
    for text in customer:
        messages.append({"role": "user", "content": text})
        if agent_calls:
            messages += [{"role": "assistant", "content": agent_calls}, {"role": "tool", "content": "{}"}]
        messages.append({"role": "assistant", "content": "How can I help further?"})
    return tuple(messages)


def review(messages: tuple[dict, ...], reward: float = 1.0, **kw) -> ReviewInput:
    return ReviewInput(INSTRUCTIONS, messages, reward, first_index=1, **kw)


def test_facts_are_found_and_grounded_in_their_normal_form() -> None:
    facts = stated_facts("My order is W2378156, zip 19122, email yusuf@example.com, it cost $1,204.50.")
    assert [f.kind for f in facts] == [FactKind.NUMBER, FactKind.NUMBER, FactKind.EMAIL, FactKind.NUMBER]
    known = Grounding(["order #W2378156 zip 19122 price 1204.5"])
    assert [known.knows(f) for f in facts] == [True, True, False, True]


def test_a_clean_customer_who_restates_its_instructions_is_not_flagged() -> None:
    messages = conversation(
        "Hi! I'm Yusuf Rossi, zip code 19122. I got order #W2378156 and want to exchange the keyboard.",
        "I do not remember my email address, sorry.",
    )
    assert run_checks(review(messages)) == []


def test_an_invented_identifier_the_agent_acts_on_is_critical() -> None:
    messages = conversation("My order number is #W5555555, please exchange the keyboard.", agent_calls=CALL)
    (finding,) = run_checks(review(messages, reward=0.0))
    assert finding.check is ReviewCheck.INVENTED_IDENTIFIER
    assert finding.tags == (ReviewTag.HALLUCINATION,)
    assert finding.severity is Severity.CRITICAL_HINDERED
    assert finding.message_index == 1 and "#W5555555" in finding.detail
    (helped,) = run_checks(review(messages, reward=1.0))
    assert helped.severity is Severity.CRITICAL_HELPED


def test_an_invented_identifier_nobody_uses_is_minor() -> None:
    messages = conversation("My email is yusuf.rossi@example.com and my order is #W2378156.")
    (finding,) = run_checks(review(messages, reward=0.0))
    assert finding.severity is Severity.MINOR and "yusuf.rossi@example.com" in finding.detail


def test_a_fact_the_agent_said_first_or_the_customers_tools_showed_is_grounded() -> None:
    messages = (
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Hi, I need help with order #W2378156."},
        {"role": "assistant", "content": "I also see order #W7777777 on your account."},
        {"role": "user", "content": "Yes, #W7777777 too. My phone shows 555-123-2002."},
    )
    assert run_checks(review(messages, tool_outputs=("Phone number: 555-123-2002",))) == []


def test_structural_errors_are_critical_only_when_the_episode_failed() -> None:
    messages = conversation(
        "Hi, I want to exchange my keyboard from order #W2378156.",
        "Agent: How can I help you today?",
        "",
        "<|im_start|>assistant",
    )
    failed = run_checks(review(messages, reward=0.0))
    assert [(f.check, f.message_index) for f in failed] == [
        (ReviewCheck.SPEAKS_AS_AGENT, 3),
        (ReviewCheck.EMPTY_REPLY, 5),
        (ReviewCheck.EMPTY_REPLY, 7),
    ]
    assert {f.severity for f in failed} == {Severity.CRITICAL_HINDERED}
    assert {f.severity for f in run_checks(review(messages, reward=1.0))} == {Severity.MINOR}


def test_a_loop_is_flagged_once_past_the_limit() -> None:
    same = "Please just do it."
    assert run_checks(review(conversation("Hi, order #W2378156.", same, same, same))) == []
    (finding,) = run_checks(review(conversation("Hi, order #W2378156.", same, same, same, same), reward=0.0))
    assert finding.check is ReviewCheck.REPEATED_MESSAGE and finding.message_index == 9


def test_pasted_instructions_are_flagged_after_the_opening_only() -> None:
    long = " ".join(f"w{i}" for i in range(40))
    inp = ReviewInput(long, conversation(long, "ok then " + long), 1.0, first_index=1)
    (finding,) = run_checks(inp)
    assert finding.check is ReviewCheck.PASTED_INSTRUCTIONS and finding.message_index == 3
    assert finding.severity is Severity.MINOR


def result_with(verdict_findings: list, reward: float = 1.0) -> tuple[EpisodeResult, Verdict]:
    traj = Trajectory((1, 2, 3))
    traj.add_model_turn([4, 5], [-0.1, -0.2])
    result = EpisodeResult(TaskRef("tau2", "retail", "train", "0"), TerminationReason.USER_STOP, traj, reward=reward)
    return result, Verdict(tuple(verdict_findings), reward=reward)


def test_a_critical_verdict_makes_the_episode_user_error_and_keeps_its_tokens() -> None:
    findings = run_checks(review(conversation("Order #W5555555 please.", agent_calls=CALL), reward=1.0))
    result, verdict = result_with(findings)
    out = apply_verdict(result, verdict, ReviewSettings())
    assert out.termination is TerminationReason.USER_ERROR and out.failed_endpoint is FailedEndpoint.CUSTOMER
    assert out.reward == 0.0 and out.review is not None and out.review.excluded and out.review.reward == 1.0
    assert out.trajectory is result.trajectory and out.trajectory.ids == [1, 2, 3, 4, 5]
    assert "invented_identifier" in (out.error or "")
    kept = apply_verdict(result, verdict, ReviewSettings(keep_flagged=True))
    assert kept.termination is TerminationReason.USER_STOP and kept.review is not None and not kept.review.excluded
    other_tags = apply_verdict(result, verdict, ReviewSettings(critical_tags=(ReviewTag.WRONG_SEQUENCE,)))
    assert other_tags.termination is TerminationReason.USER_STOP


def test_a_minor_verdict_keeps_the_episode() -> None:
    findings = run_checks(review(conversation("My email is a.b@example.com, order #W2378156."), reward=1.0))
    result, verdict = result_with(findings)
    out = apply_verdict(result, verdict, ReviewSettings())
    assert out.termination is TerminationReason.USER_STOP and out.review is not None
    assert out.review.as_metadata()["severity"] == "minor"


def test_metrics_count_by_tag_severity_check_and_task() -> None:
    findings = run_checks(review(conversation("Order #W5555555 please.", agent_calls=CALL), reward=0.0))
    bad = Verdict(tuple(findings), reward=0.0, excluded=True).as_metadata()
    clean = Verdict().as_metadata()
    metas = [{"tau_review": bad}, {"tau_review": clean}, {"tau_review": clean}, {}]
    out = review_metrics(metas, ["7", "7", "8", "9"])
    assert out["review/excluded"] == 1.0 and out["review/reviewed"] == 0.75
    assert out["review/severity/critical_hindered"] == 0.25 and out["review/tag/hallucination"] == 0.25
    assert out["review/check/invented_identifier"] == 0.25 and out["review/task/7/excluded"] == 1.0
    assert is_customer_error(metas[0]) and not is_customer_error(metas[1])


def customer_failed(n: int) -> list[SimpleNamespace]:
    meta = {"termination_reason": "user_error", "failed_endpoint": "customer", "error": "CustomerError: x"}
    return [SimpleNamespace(status=SimpleNamespace(name="FAILED"), remove_sample=True, metadata=dict(meta))] * n


def test_the_guard_names_the_customer_past_its_own_share() -> None:
    ok = SimpleNamespace(status=SimpleNamespace(name="COMPLETED"), remove_sample=False, metadata={}, reward=1.0)
    assert failure_endpoint(customer_failed(1)[0]) == "customer"
    settings = guard_settings(SimpleNamespace(tau_review_max_error_share=0.25, tau_failure_window_groups=2))
    assert settings.limit("customer") == 0.25 and settings.limit("user") == 0.5
    guard = FailureGuard(settings)
    guard.observe([ok, ok, *customer_failed(2)])  # 2 of a 8-episode window: not above 0.25
    with pytest.raises(FailureGuardError, match="simulated customer.*tau_review_max_error_share=0.25"):
        guard.observe([ok, ok, ok, *customer_failed(1)])


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"review_critical_tags": "hallucination,made_up"}, "tau_review_critical_tags='hallucination,made_up' names"),
        ({"review_checks": "speaks_as_agent,judge"}, "tau_review_checks='speaks_as_agent,judge' names 'judge'"),
        ({"review_judge_share": 1.5}, "tau_review_judge_share=1.5 is invalid"),
        ({"review_max_error_share": -0.1}, "tau_review_max_error_share=-0.1 is invalid"),
        ({"review_judge_share": 0.2}, "tau_review_judge_share=0.2 needs a judge endpoint"),
    ],
)
def test_bad_review_keys_are_one_line_naming_the_key(values: dict, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        TauConfig(**values)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_settings_read_from_the_config() -> None:
    config = TauConfig(review_checks="speaks_as_agent", review_keep_flagged=True, review_repeat_limit=5)
    settings = ReviewSettings.from_config(config)
    assert settings.checks == (ReviewCheck.SPEAKS_AS_AGENT,) and settings.keep_flagged
    assert settings.repeat_limit == 5 and settings.critical_tags == tuple(ReviewTag)


def test_the_judges_answer_is_read_with_taus_schema() -> None:
    answer = (
        'Here: ```json {"errors": [{"turn_idx": 3, "error_tags": ["hallucination", "made_up"], '
        '"severity": "critical_hindered", "reasoning": "invented a zip"}], "summary": "s"} ```'
    )
    (finding,) = parse_answer(answer, [1, 3])
    assert finding.check is ReviewCheck.JUDGE and finding.message_index == 3
    assert finding.tags == (ReviewTag.HALLUCINATION, ReviewTag.OTHER) and finding.severity is Severity.CRITICAL_HINDERED
    assert parse_answer('{"errors": [], "summary": "clean"}', [1]) == []
    for bad in ("no json", '{"errors": [{"turn_idx": 2, "severity": "minor"}]}', '{"errors": [{"turn_idx": 1}]}'):
        with pytest.raises(ValueError):
            parse_answer(bad, [1, 3])


def test_the_judged_share_is_a_stable_draw() -> None:
    keys = [f"task:{i}" for i in range(2000)]
    picked = [k for k in keys if is_selected(0.25, k)]
    assert 400 < len(picked) < 600 and picked == [k for k in keys if is_selected(0.25, k)]
    assert not any(is_selected(0.0, k) for k in keys) and all(is_selected(1.0, k) for k in keys)


def test_the_stand_ins_go_ahead_answer_is_never_a_loop() -> None:
    messages = conversation("Hi, order #W2378156.", *([GO_AHEAD] * 6))
    assert run_checks(review(messages, reward=0.0)) == []


def test_show_and_the_summary_mark_the_flagged_customer_message() -> None:
    messages = conversation("Order #W5555555 please.", agent_calls=CALL)
    findings = run_checks(review(messages, reward=0.0))
    meta = {"messages": list(messages), "tau_review": Verdict(tuple(findings), excluded=True).as_metadata()}
    lines = review_lines(meta)
    assert lines[0] == "customer review: critical_hindered, taken out of training (user_error)"
    assert lines[1].startswith("  >> message 1 [invented_identifier; hallucination; critical_hindered]")
    assert "Order #W5555555 please." in lines[2]
    assert "<pre class='flagged'>Order #W5555555 please.</pre>" in review_html(meta)
    assert review_lines({"tau_review": Verdict().as_metadata()}) == [] and review_html({}) == ""
    summary = review_summary_line(
        {"samples": 4, "review/flagged": 0.25, "review/excluded": 1.0, "review/tag/hallucination": 0.25}
    )
    assert summary is not None and "1 episodes flagged (hallucination), 1 taken out as user_error" in summary
