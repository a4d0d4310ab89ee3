"""The τ-bench v1 backend behind the common env interface: tasks, errors, steps, isolation, rows, oracle.

Needs tau_bench (not on PyPI; CI skips): ``pip install litellm pydantic; pip install --no-deps <checkout>``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm (imported by tau_bench) stays offline
pytest.importorskip("tau_bench")

from slime_tau_plugin.engine.envs import EnvOptions, EnvToolCall, TaskRef, get_backend  # noqa: E402
from slime_tau_plugin.engine.envs.tau1 import Tau1Backend, Tau1Session  # noqa: E402
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.errors import ConfigError  # noqa: E402

COUNTS = {("retail", "train"): 500, ("retail", "test"): 115, ("retail", "dev"): 20, ("airline", "test"): 50}


@pytest.fixture(scope="module")
def backend() -> Tau1Backend:
    return Tau1Backend()


def ref(domain: str = "retail", split: str = "test", index: int = 0, task: dict | None = None) -> TaskRef:
    return TaskRef("tau1", domain, split, str(index), task)


def play_oracle(session: Tau1Session) -> float:
    """Every gold action, then a message with the task's outputs: v1's reference solution."""
    termination = TerminationReason.USER_STOP
    for i, action in enumerate(session.script.gold_actions):
        if session.step(EnvToolCall(action.name, action.arguments, f"call-{i}")).is_done:
            termination = TerminationReason.AGENT_STOP
            break
    if termination is TerminationReason.USER_STOP:
        session.record_message("assistant", "Done. " + "; ".join(session.script.gold_outputs))
    return session.reward(termination).reward


def test_registry_and_splits(backend: Tau1Backend) -> None:
    assert isinstance(get_backend("tau1"), Tau1Backend)
    assert backend.splits("retail") == ("train", "test", "dev")
    assert backend.splits("airline") == ("test",)
    for (domain, split), n in COUNTS.items():
        refs = backend.task_refs(domain, split)
        assert len(refs) == n
        assert refs[3] == TaskRef("tau1", domain, split, "3")


def test_config_errors_name_field_and_choices(backend: Tau1Backend) -> None:
    with pytest.raises(ConfigError, match=r"domain \(benchmark tau1\)='telecom'.*airline, retail"):
        backend.task_refs("telecom", "test")
    with pytest.raises(ConfigError, match=r"split='train' is unknown for tau1/airline; expected one of test"):
        backend.task_refs("airline", "train")
    with pytest.raises(ConfigError, match=r"split='base'.*train, test, dev"):
        backend.open(ref(split="base"))
    with pytest.raises(ConfigError, match=r"task_id='115'.*tau1/retail/test \(0\.\.114\)"):
        backend.open(ref(index=115))
    with pytest.raises(ConfigError, match=r"task_id='x'"):
        backend.open(TaskRef("tau1", "retail", "test", "x"))
    with pytest.raises(ConfigError, match=r"reward_mode='slow'.*fast, reference"):
        backend.open(ref(), EnvOptions(reward_mode="slow"))
    with pytest.raises(ConfigError, match=r"not a v1 task"):
        backend.open(ref(task={"instruction": "no actions"}))


def test_tools_policy_and_version_are_v1s(backend: Tau1Backend) -> None:
    for domain in ("retail", "airline"):
        env = backend.v1_env(domain, backend.splits(domain)[0])
        session = backend.open(ref(domain, backend.splits(domain)[0]))
        assert session.tools == env.tools_info
        assert session.agent_system_prompt == env.wiki
        assert session.user_tools == ()
    assert backend.package_version() == {"tau_package": "tau-bench", "tau_version": "0.1.0"}


def test_step_errors_worded_like_v1(backend: Tau1Backend) -> None:
    session = backend.open(ref())
    unknown = session.step(EnvToolCall("no_such_tool", {}, "c1"))
    assert (unknown.content, unknown.is_error, unknown.is_done) == ("Unknown action no_such_tool", True, False)
    bad = session.step(EnvToolCall("get_order_details", {"order": "#W2378156"}, "c2"))
    assert bad.is_error and bad.content.startswith("Error: ") and "unexpected keyword argument 'order'" in bad.content
    missing = session.step(EnvToolCall("get_order_details", {"order_id": "#W0"}, "c3"))
    assert (missing.content, missing.is_error) == ("Error: order not found", True)
    ok = session.step(EnvToolCall("get_order_details", {"order_id": "#W2378156"}, "c4"))
    assert not ok.is_error and '"order_id": "#W2378156"' in ok.content


def test_transfer_ends_the_episode(backend: Tau1Backend) -> None:
    session = backend.open(ref("airline", "test", 13))
    step = session.step(EnvToolCall("transfer_to_human_agents", {"summary": "needs a human"}, "c1"))
    assert (step.content, step.is_done, step.is_error) == ("Transfer successful", True, False)
    # v1 ends the episode on a terminate tool even when the call itself fails (envs/base.py:108).
    failed = backend.open(ref()).step(EnvToolCall("transfer_to_human_agents", {}, "c1"))
    assert failed.is_done and failed.is_error


def test_episodes_are_isolated(backend: Tau1Backend) -> None:
    writes = ("cancel", "modify", "exchange", "return")
    task_ref = next(
        r
        for r in backend.task_refs("retail", "test")
        if any(a.name.startswith(writes) for a in backend.script(r).gold_actions)
    )
    a, b = backend.open(task_ref), backend.open(task_ref)
    for i, action in enumerate(a.script.gold_actions):
        a.step(EnvToolCall(action.name, action.arguments, f"a{i}"))
    assert a.reward(TerminationReason.USER_STOP).reward == 1.0
    assert b.reward(TerminationReason.USER_STOP).reward == 0.0  # a's writes are not in b's database
    written = {name: table.owned for name, table in a.data.items() if table.owned}
    assert written
    pristine = backend.domain("retail").pristine
    for name, keys in written.items():
        for key in keys:
            assert dict.get(b.data[name], key) is dict.get(pristine[name], key)
            assert dict.get(a.data[name], key) is not dict.get(pristine[name], key)
    # Arguments are copied: mutating what the caller passed (or the script) does not reach the database.
    args = {"user_id": "mia_li_3668", "amount": 100}
    c = backend.open(ref("airline", "test", 0))
    c.step(EnvToolCall("send_certificate", args, "c1"))
    args["amount"] = 5
    assert c.data["users"]["mia_li_3668"]["payment_methods"]["certificate_3221322"]["amount"] == 100
    assert "certificate_3221322" not in backend.domain("airline").pristine["users"]["mia_li_3668"]["payment_methods"]
    script = backend.script(ref())
    script.gold_actions[-1].arguments.clear()
    assert backend.script(ref()).gold_actions[-1].arguments


def test_threads_share_nothing_mutable(backend: Tau1Backend) -> None:
    refs = backend.task_refs("retail", "test") + backend.task_refs("airline", "test")
    with ThreadPoolExecutor(8) as pool:
        rewards = list(pool.map(lambda r: play_oracle(backend.open(r)), refs * 2))
    assert rewards == [1.0] * len(rewards)


def test_task_rows_round_trip(backend: Tau1Backend) -> None:
    task0 = backend.task_dump(ref(index=0))
    assert set(task0) == {"user_id", "actions", "instruction", "outputs"}
    assert task0 == backend.tasks("retail", "test")[0].model_dump() and task0["outputs"] == []
    # The row's own task wins over the index (the data may have changed since the row was prepared).
    row_ref = ref(index=5, task=task0)
    assert backend.task_dump(row_ref) == task0
    row_script, index_script = backend.script(row_ref), backend.script(ref(index=0))
    assert (row_script.user_instructions, row_script.gold_actions) == (
        index_script.user_instructions,
        index_script.gold_actions,
    )
    assert row_script.task_id == "5"  # the row names its task
    assert play_oracle(backend.open(row_ref)) == 1.0
    # An edited row is scored by its own content: an output nobody says now fails the same episode.
    for task, expected in ((task0, 1.0), ({**task0, "outputs": ["a string nobody says"]}, 0.0)):
        session = backend.open(ref(index=5, task=task))
        for i, action in enumerate(backend.script(ref(index=0)).gold_actions):
            session.step(EnvToolCall(action.name, action.arguments, f"c{i}"))
        session.record_message("assistant", "Done.")
        assert (
            session.reward(TerminationReason.USER_STOP).reward
            == session.reference_reward(TerminationReason.USER_STOP).reward
            == expected
        )


def test_script_and_user_prompt(backend: Tau1Backend) -> None:
    task = backend.tasks("airline", "test")[5]
    script = backend.script(ref("airline", "test", 5))
    assert script.user_instructions == task.instruction
    assert [(a.name, a.arguments, a.requestor) for a in script.gold_actions] == [
        (a.name, a.kwargs, "assistant") for a in task.actions
    ]
    assert script.gold_outputs == tuple(task.outputs)
    prompt = backend.open(ref("airline", "test", 5)).user_system_prompt()
    assert prompt.startswith("You are a user interacting with an agent.")
    assert f"Instruction: {task.instruction}\n" in prompt and "###STOP###" in prompt


def test_llm_user_conversation_starts_like_v1s(backend: Tau1Backend) -> None:
    """v1's LLM user reset() sends [system prompt, greeting] to its model: capture it without a model."""
    from tau_bench.envs.user import LLMUserSimulationEnv

    class Captured(LLMUserSimulationEnv):
        def generate_next_message(self, messages: list[dict]) -> str:
            self.sent = [dict(m) for m in messages]
            return "hello"

    session = backend.open(ref("retail", "train", 7))
    user = Captured.__new__(Captured)
    user.reset(instruction=session.task.instruction)
    assert user.sent == [
        {"role": "system", "content": session.user_system_prompt()},
        {"role": "user", "content": session.first_agent_message},
    ]
    assert session.user_stop_markers == ("###STOP###",)  # v1 ends on "###STOP###" in the user's text


def test_unscored_terminations_get_zero(backend: Tau1Backend) -> None:
    session = backend.open(ref("retail", "test", 4))
    assert play_oracle(session) == 1.0
    for termination in (TerminationReason.MAX_TURNS, TerminationReason.BUDGET, TerminationReason.LENGTH):
        for result in (session.reward(termination), session.reference_reward(termination)):
            assert result.reward == 0.0
            assert result.breakdown["scored"] is False and result.breakdown["termination"] == termination.value


def test_breakdown_and_reference_mode(backend: Tau1Backend) -> None:
    with_outputs = next(r for r in backend.task_refs("retail", "test") if backend.script(r).gold_outputs)
    session = backend.open(with_outputs, EnvOptions(reward_mode="reference"))
    for i, action in enumerate(session.script.gold_actions):
        session.step(EnvToolCall(action.name, action.arguments, f"c{i}"))
    session.record_message("assistant", "nothing useful")
    ref_result, own = session.reward(TerminationReason.USER_STOP), session.reference_reward(TerminationReason.USER_STOP)
    assert ref_result.reward == own.reward == 0.0
    assert ref_result.breakdown["reward_mode"] == "reference"
    assert own.breakdown["outputs_met"] == [False] * len(session.script.gold_outputs)
    # v1 reports only the outputs check when a task has outputs; its gold replay's hash gives the DB part
    assert own.breakdown["db_match"] is True
    assert own.breakdown["partial_scores"] == {"DB": 1.0, "ACTION": 1.0, "OUTPUTS": 0.0}
    assert ref_result.breakdown["partial_score"] == own.breakdown["partial_score"] == 2 / 3
    plain = backend.open(with_outputs)
    assert play_oracle(plain) == 1.0
    breakdown = plain.reward(TerminationReason.USER_STOP).breakdown
    assert breakdown["db_match"] is True and all(breakdown["outputs_met"])
    assert breakdown["reward_breakdown"] == {"r_actions": 1.0, "r_outputs": 1.0}


def test_oracle_scores_one_on_every_task(backend: Tau1Backend) -> None:
    for (domain, split), n in COUNTS.items():
        rewards = [play_oracle(backend.open(r)) for r in backend.task_refs(domain, split)]
        assert sum(rewards) == n, f"{domain}/{split}: oracle {sum(rewards)}/{n}"


@pytest.mark.parametrize("user", ["scripted", "llm"])
def test_oracle_through_the_engine_with_both_user_simulators(backend, qwen25_dir, tmp_path, user) -> None:
    """``slime-tau rollout --benchmark tau1``: the full engine (real HTTP, chat template, parser) on v1."""
    import json

    from slime_tau_plugin.tools.cli import main

    out = tmp_path / user
    argv = ["rollout", "--benchmark", "tau1", "--domain", "airline", "--split", "test", "--user", user]
    assert main([*argv, "--tokenizer", qwen25_dir, "--tasks", "0-9", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())["domains"]["tau1/airline"]
    assert summary["pass^1"] == 1.0 and summary["statuses"] == {"completed": 10}
    assert summary["tau_package"][0].startswith("tau-bench ")
