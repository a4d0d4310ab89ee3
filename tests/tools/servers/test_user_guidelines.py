"""``tau_user_guidelines_file``: a run's customer follows the team's guidelines, and every result says which (issue 40).

The override goes through the real paths: the LLM user's first request to our chat user server (over HTTP) carries
the file's text where τ² puts its guidelines, with the task's own scenario; the review's verdict and the customer
cost name it. Bad input is one line naming the key, through the CLI (exit 2) and inside slime's ``generate``.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scenario_of
from slime_tau_plugin.tools.servers.fake_models import EchoModel
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples
from tests.slime_args import slime_args
from tests.tools.cli.test_cli_rollout import assert_one_line_error, slime_tau

FIX = (
    "# Our customer\n- Only if the instruction goal is satisfied, generate '###STOP###'.\n"
    "- If the agent asks you to confirm an action, confirm and wait until it says the action is done."
)
LLM_FLAGS = ["--user", "llm", "--user-base-url", "http://127.0.0.1:9/v1", "--user-model", "m"]


@pytest.fixture
def guidelines(tmp_path: Path) -> Path:
    path = tmp_path / "retail_fix.md"
    path.write_text(FIX + "\n")
    return path


@pytest.mark.parametrize(
    ("case", "needle"),
    [("missing", "does not exist"), ("empty", "is empty"), ("scripted", "is for the LLM user; add --user llm")],
)
def test_bad_guidelines_are_one_cli_line_naming_the_flag(case: str, needle: str, tmp_path: Path, guidelines: Path):
    file = {"missing": tmp_path / "nope.md", "empty": tmp_path / "empty.md", "scripted": guidelines}[case]
    if case == "empty":
        file.write_text("  \n\n")
    user = ["--user", "scripted"] if case == "scripted" else LLM_FLAGS
    done = slime_tau(["rollout", *user, "--user-guidelines-file", str(file), "--out", str(tmp_path / "run")])
    assert_one_line_error(done, "--user-guidelines-file", needle)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("case", ["missing", "empty", "scripted"])
def test_bad_guidelines_inside_generate_are_a_config_error_naming_the_key(
    case: str, tmp_path: Path, guidelines: Path, tau2_backend, qwen25, qwen25_dir
):
    file = {"missing": tmp_path / "nope.md", "empty": tmp_path / "empty.md", "scripted": guidelines}[case]
    if case == "empty":
        file.write_text("\n")
    user = {"tau_user": "scripted"}
    if case != "scripted":
        user = {"tau_user": "llm", "tau_user_base_url": "http://127.0.0.1:9/v1", "tau_user_model": "m"}
    sample = make_samples(tau2_backend, "retail", "test", 1)[0]
    policy = SGLangServer(EchoModel(qwen25)).start()
    try:
        args = slime_args(policy, qwen25_dir, tau_user_guidelines_file=str(file), **user)
        with pytest.raises(ConfigError) as info:
            asyncio.run(generate(args, sample, SAMPLING))
    finally:
        policy.stop()
    message = str(info.value)
    assert message.startswith("tau_user_guidelines_file") and "\n" not in message


def test_the_customer_runs_the_files_guidelines_and_the_verdict_and_cost_name_them(
    tau2_backend, oracle_server_factory, qwen25, qwen25_dir, guidelines
):
    policy = oracle_server_factory(qwen25, (("retail", "test"),))
    user = ChatUserServer(max_replies=1).start()
    try:
        args = slime_args(
            policy,
            qwen25_dir,
            tau_user="llm",
            tau_user_base_url=user.base_url,
            tau_user_model="scripted-user",
            tau_user_guidelines_file=str(guidelines),
        )
        samples = make_samples(tau2_backend, "retail", "test", 2)
        for sample in samples:
            asyncio.run(generate(args, sample, SAMPLING))
        first = user.requests[0]["messages"][0]["content"]
    finally:
        user.stop()
    label = f"retail_fix.md@{hashlib.sha256(guidelines.read_bytes()).hexdigest()[:12]}"  # sha256sum's
    assert first.startswith(FIX) and "simulation guidelines" not in first.lower()[: len(FIX)]
    assert scenario_of([{"role": "system", "content": first}]), "the task's scenario is where τ² puts it"
    for sample in samples:
        assert sample.reward == 1.0
        assert sample.metadata["tau_review"]["guidelines"] == label
        assert sample.metadata["tau_user_cost"]["guidelines"] == label


def test_tau1s_prompt_keeps_its_instruction_and_takes_the_rules_from_the_file():
    pytest.importorskip("tau_bench")
    from slime_tau_plugin.engine.envs import get_backend

    backend = get_backend("tau1")
    session = backend.open(backend.task_refs("retail", "test")[0])
    own, ours = session.user_system_prompt(), session.user_system_prompt(FIX)
    assert own.split("Rules:")[0] == ours.split("Rules:")[0]  # τ's opening and the task's instruction
    assert ours.endswith("Rules:\n" + FIX) and "Do not hallucinate" in own and "Do not hallucinate" not in ours
    assert scenario_of([{"role": "system", "content": ours}]) == session.task.instruction
