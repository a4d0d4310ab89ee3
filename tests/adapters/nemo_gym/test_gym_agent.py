"""NeMo Gym's own rollout collection and client against our τ agent (real HTTP, oracle server, real τ² retail)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from tests.adapters.nemo_gym.conftest import AGENT, DEAD_USER_AGENT, TASK


def test_rollout_collection_keeps_oracle_episodes_with_per_turn_tokens_and_taus_reward(collected):
    from slime_tau_plugin.adapters.nemo_gym.turns import run_trajectory

    main = collected["main"]
    assert [r["agent_ref"]["name"] for r in main] == [AGENT, AGENT]
    for row in main:
        assert row["reward"] == 1.0 and row["tau_status"] == "completed" and row["tau_termination"] == "user_stop"
        turns = [item for item in row["response"]["output"] if "generation_token_ids" in item]
        assert len(turns) == row["tau_num_turns"] >= 1
        for turn in turns:
            assert len(turn["generation_token_ids"]) == len(turn["generation_log_probs"]) > 0
        traj = run_trajectory(row)  # each turn's prompt extends the previous turn's prompt + generation
        assert sum(traj.loss_mask) == sum(len(t["generation_token_ids"]) for t in turns)
    agg = {entry["agent_ref"]["name"]: entry for entry in collected["metrics"]}
    assert agg[AGENT]["agent_metrics"]["mean/reward"] == 1.0


def test_a_dead_user_simulator_is_a_failed_masked_rollout(collected):
    failed = collected["failures"]
    assert [r["agent_ref"]["name"] for r in failed] == [DEAD_USER_AGENT, DEAD_USER_AGENT]
    for row in failed:
        assert row["_ng_failure_class"] == "transient" and row["reward"] == 0.0  # never null: NeMo RL reads floats
        assert row["instance_config"] == {"mask_sample": True} and row["mask_sample"] is True
        assert row["tau_status"] == "failed" and row["tau_termination"] == "user_error" and row["tau_error"]
        (placeholder,) = [item for item in row["response"]["output"] if "generation_token_ids" in item]
        assert len(placeholder["generation_token_ids"]) == 1 and row["response"]["metadata"]["tau_placeholder"]
    assert all(r["agent_ref"]["name"] == AGENT for r in collected["main"])
    # the failed rollouts are not scored: the dead agent's aggregate has no reward to average
    agg = {entry["agent_ref"]["name"]: entry for entry in collected["metrics"]}
    assert "mean/reward" not in agg[DEAD_USER_AGENT]["agent_metrics"]


def test_seed_session_verify_and_a_row_without_a_task(collected):
    answers = collected["answers"]
    assert answers["seed"] == (200, {"task": TASK, "benchmark": "tau2", "domain": "retail", "split": "train"})
    status, verified = answers["verify"]
    assert status == 200 and verified["reward"] == 1.0
    status, refused = answers["no_task"]
    assert status == 400 and "names no τ task" in refused["detail"] and "\n" not in refused["detail"]


def test_tokens_mask_log_probs_and_reward_equal_slimes_sample(collected, oracle, qwen25_dir):
    """The same task and seed through slime's generate (SGLang's /generate) and NeMo Gym's /run (vLLM's
    /v1/completions behind the named model server) give the same sample."""
    from slime_tau_plugin.adapters.nemo_gym.turns import run_trajectory
    from slime_tau_plugin.adapters.slime.generate import generate
    from tests.contracts.slime_sample import Sample
    from tests.slime_args import slime_args

    sampling = {"temperature": 1.0, "top_p": 1.0, "no_stop_trim": True, "skip_special_tokens": False}
    metadata = {"benchmark": "tau2", "domain": "retail", "split": "train", "task_id": "57"}
    sample = Sample(prompt=None, metadata=metadata, session_id="gym-parity-0")
    asyncio.run(generate(slime_args(oracle, qwen25_dir), sample, {**sampling, "sampling_seed": 7}))
    assert sample.status is Sample.Status.COMPLETED
    traj = run_trajectory(collected["main"][0])
    assert list(traj.prompt_ids + traj.response_ids) == sample.tokens
    assert list(traj.loss_mask) == sample.loss_mask
    assert list(traj.log_probs) == sample.rollout_log_probs
    assert traj.reward == sample.reward == 1.0


def test_a_turn_that_does_not_extend_the_last_is_refused():
    from slime_tau_plugin.adapters.nemo_gym.turns import run_trajectory

    turn = {"prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.5]}
    bad = {**turn, "prompt_token_ids": [1, 9, 3]}
    run = {"response": {"output": [turn, bad]}, "tau_prompt_len": 2, "tau_tail_ids": [], "reward": 1.0}
    with pytest.raises(ValueError, match="turn 1"):
        run_trajectory(run)
    good = {**run, "response": {"output": [turn, {**turn, "prompt_token_ids": [1, 2, 3, 4]}]}, "tau_tail_ids": [5]}
    traj = run_trajectory(good)
    assert traj.prompt_ids == (1, 2) and traj.response_ids == (3, 4, 3, 5) and traj.loss_mask == (1, 0, 1, 0)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gym-head", "nohost"], "expected HOST:PORT"),
        (["--port", "1"], "no policy: name a NeMo Gym model server"),
        (["--port", "1", "--policy-url", "http://127.0.0.1:1"], "tau_tokenizer_path is unset"),
        (["--port", "1", "--tokenizer", "x", "--tau-config", "/no/such.yaml"], "--tau-config /no/such.yaml"),
    ],
)
def test_serve_gym_refuses_bad_input_in_one_line(args, says, capsys):
    from slime_tau_plugin.tools.cli.main import main

    assert main(["serve-gym", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err and err.startswith("slime-tau serve-gym: error:")


def test_serve_gym_names_an_agent_the_head_does_not_have(gym, capsys):
    from slime_tau_plugin.tools.cli.main import main

    assert main(["serve-gym", "--gym-head", f"{gym.head[0]}:{gym.head[1]}", "--name", "nope"]) == 2
    assert "has no server nope" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("key", "value", "readers"),
    [
        ("tau_task_record_dir", "/runs/a", "only slime reads it"),
        ("tau_curriculum_window", 8, "only slime reads it"),
        ("tau_max_failed_share", 0.1, "only slime, verl, trl read it"),
    ],
)
def test_a_key_the_table_says_nemo_gym_does_not_read_is_refused_in_the_agents_config(key, value, readers, qwen25_dir):
    """The agent's ``tau`` entry of NeMo Gym's app config goes through ``engine/config/keys.py``'s KEY_READERS."""
    from slime_tau_plugin.adapters.nemo_gym.serve import build_agent
    from slime_tau_plugin.engine.errors import ConfigError

    tau = {"tau_policy_url": "http://127.0.0.1:1", "tau_tokenizer_path": qwen25_dir}
    with pytest.raises(ConfigError) as refused:
        build_agent("standalone", port=1, tau={**tau, key: value})
    assert str(refused.value) == f"{key}={value!r} does nothing under nemo_gym ({readers}); remove it"
    kept = build_agent("standalone", port=1, tau={**tau, "tau_task_record_dir": None})  # its default passes
    assert kept.tau_config().task_record_dir is None


def test_import_slime_tau_plugin_does_not_import_nemo_gym():
    code = (
        "import sys, slime_tau_plugin, slime_tau_plugin.adapters.nemo_gym, slime_tau_plugin.tools.cli.main; "
        "sys.exit(1 if 'nemo_gym' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_row_of_another_benchmark_plays_with_a_config_of_its_own(oracle, qwen25_dir):
    """The engine plays one benchmark per config; a τ-bench v1 row on a τ² agent gets a tau1 config, the same
    otherwise (a τ² row shares the agent's own config and its resources)."""
    from slime_tau_plugin.adapters.nemo_gym.serve import build_agent

    agent = build_agent("standalone", port=1, tau={"tau_policy_url": oracle.url, "tau_tokenizer_path": qwen25_dir})
    assert agent.tau_config("tau2") is agent.tau_config()
    v1 = agent.tau_config("tau1")
    assert v1.benchmark == "tau1" and v1.policy_url == oracle.url and v1.tokenizer_path == qwen25_dir
