"""Where τ settings come from under verl, how verl's limits map onto them, and rows that survive parquet."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slime_tau_plugin.adapters.verl.agent_loop import verl_tau_config
from slime_tau_plugin.adapters.verl.rows import task_ref_from_extra_info, verl_rows
from slime_tau_plugin.engine.errors import ConfigError
from tests.adapters.verl.conftest import AGENT_LOOP_YAML, ROOT, refs_with_tasks, verl_config
from tests.adapters.verl.rows import write_verl_parquet


def test_verl_limits_bound_the_episode_budgets(base_verl_config):
    config = verl_config(
        "data.max_prompt_length=6000",
        "data.max_response_length=3000",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=12",
        "+data.apply_chat_template_kwargs.enable_thinking=false",
    )
    tau = verl_tau_config(config, {"tau_max_turns": 30, "tau_max_response_len": 5000})
    assert (tau.max_response_len, tau.max_context_len, tau.max_turns) == (3000, 9000, 12)
    assert tau.enable_thinking is False
    tighter = verl_tau_config(config, {"tau_max_response_len": 2000, "tau_max_context_len": 7000, "tau_max_turns": 5})
    assert (tighter.max_response_len, tighter.max_context_len, tighter.max_turns) == (2000, 7000, 5)
    capped = verl_config("+actor_rollout_ref.rollout.max_model_len=4096")
    assert verl_tau_config(capped, {}).max_context_len == 4096


def test_trainer_tau_section_overrides_the_yaml_entry():
    config = verl_config("+tau.domain=airline", "+tau.user_retries=2")
    tau = verl_tau_config(config, {"tau_domain": "retail", "tau_user_retries": 7, "tau_env_workers": 3})
    assert (tau.domain, tau.user_retries, tau.env_workers) == ("airline", 2, 3)


@pytest.mark.parametrize(
    ("overrides", "settings", "message"),
    [
        ((), {"tau_domian": "retail"}, "did you mean tau_domain?"),
        (("+tau.usr=llm",), {}, "trainer config key tau.usr is not a slime_tau_plugin setting; did you mean tau.user?"),
        ((), {"tau_policy_url": "http://x:1"}, "does nothing under verl .verl provides it"),
        ((), {"tau_episode_workers": 4}, "tau_episode_workers=4 does nothing under verl"),
        ((), {"tau_reward_shaping": 0.5}, "tau_reward_shaping=0.5 does nothing under verl .only slime, trl, nemo_gym"),
        ((), {"tau_max_weight_lag": 0}, "tau_max_weight_lag=0 does nothing under verl .only slime reads it"),
        (("+tau.max_failed_share=1.5",), {}, "max_failed_share"),
        (("+async_training.staleness_threshold=0.1",), {}, "fully-async recipe .* is not supported"),
        (("+rollout.n_gpus_per_node=2",), {}, "one-step-off recipe .* is not supported"),
        ((), {"tau_domain": "retial"}, "expected one of airline, retail, telecom"),
        ((), {"tau_env_workers": "eight"}, "tau_env_workers='eight' is invalid; expected an integer"),
        ((), {"tau_max_turns": "many"}, "tau_max_turns='many' is invalid; expected an integer"),
        (("actor_rollout_ref.rollout.multi_turn.max_user_turns=5",), {}, "multi_turn.max_user_turns=5 is not applied"),
        (("actor_rollout_ref.rollout.multi_turn.max_parallel_calls=4",), {}, "every tool call of a turn runs"),
        (("actor_rollout_ref.rollout.multi_turn.max_tool_response_length=1024",), {}, "a tool response is shown whole"),
        (("actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=left",), {}, "never cut"),
        (("actor_rollout_ref.rollout.multi_turn.enable=false",), {}, "multi_turn.enable=False must be true"),
        (("actor_rollout_ref.rollout.multi_turn.format=llama3_json",), {}, "tau_tool_call_parser"),
        (("actor_rollout_ref.rollout.multi_turn.use_inference_chat_template=true",), {}, "exactly the ids"),
        (("actor_rollout_ref.rollout.multi_turn.tool_config_path=/x.yaml",), {}, "τ's environment brings its tools"),
        (("actor_rollout_ref.rollout.multi_turn.num_repeat_rollouts=2",), {}, "rollout.n sets the repeats"),
        (("+actor_rollout_ref.rollout.multi_turn.newer_knob=1",), {}, "newer_knob=1 is unknown to slime_tau_plugin"),
    ],
)
def test_wrong_settings_raise_config_errors(overrides, settings, message):
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")) as refused:
        verl_tau_config(verl_config(*overrides), settings)
    assert "\n" not in str(refused.value)


def test_every_verl_multi_turn_knob_has_a_rule_and_the_honoured_ones_apply():
    """A knob verl adds is refused unless at its default (the test fails here first, so it gets a rule)."""
    import dataclasses

    from verl.workers.config import MultiTurnConfig

    from slime_tau_plugin.adapters.verl.multi_turn import RULES

    assert {f.name for f in dataclasses.fields(MultiTurnConfig) if not f.name.startswith("_")} == set(RULES)
    honoured = verl_config(
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=7",
        "actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode=disable",
    )
    assert verl_tau_config(honoured, {"tau_max_turns": 30}).max_turns == 7


def test_a_quoted_number_in_the_agent_loop_yaml_is_coerced():
    tau = verl_tau_config(verl_config(), {"tau_max_turns": "7", "tau_env_workers": "3"})
    assert (tau.max_turns, tau.env_workers) == (7, 3)


def test_rows_round_trip_through_verl_dataset_exactly(tmp_path, tau2_backend, qwen25, base_verl_config):
    """Task dumps of different shapes share one parquet file; verl's dataset gives each back unchanged."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from slime_tau_plugin.engine.config.tau_config import TauConfig

    refs = refs_with_tasks(tau2_backend, "retail", "train") + refs_with_tasks(tau2_backend, "airline", "test")
    rows = verl_rows(refs)
    assert {r["data_source"] for r in rows} == {"tau2_retail", "tau2_airline"}
    path = write_verl_parquet(rows, tmp_path / "mix.parquet")
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=qwen25, config=base_verl_config.data)
    assert len(dataset) == len(refs)
    for i, ref in enumerate(refs):
        row = dataset[i]
        assert row["agent_name"] == "tau_agent" and row["index"] == i and row["raw_prompt"] == rows[i]["prompt"]
        back = task_ref_from_extra_info(row["extra_info"], TauConfig())
        assert back == ref and back.task == ref.task


def test_a_mixed_file_row_ignores_the_other_benchmarks_null_key():
    from slime_tau_plugin.engine.config.tau_config import TauConfig

    extra_info = {"index": 0, "benchmark": "tau2", "domain": "retail", "split": "train", "task_id": "5"}
    extra_info["task_index"] = None  # parquet's null for the tau1 rows' column
    ref = task_ref_from_extra_info(extra_info, TauConfig())
    assert (ref.benchmark, ref.domain, ref.split, ref.task_id) == ("tau2", "retail", "train", "5")
    with pytest.raises(ConfigError, match="not JSON text"):
        task_ref_from_extra_info({**extra_info, "task": "{broken"}, TauConfig())


def test_parsers_import_with_torch_installed():
    """Every verl image has torch: SGLang's parsers must import next to it (the real xgrammar, or its parts)."""
    code = (
        "import torch, json\n"
        "from slime_tau_plugin.engine.chat.tool_calls import import_sglang_parsers\n"
        "FunctionCallParser, Tool, Function, _ = import_sglang_parsers()\n"
        "tools = [Tool(type='function', function=Function(name='f', parameters={'type': 'object'}))]\n"
        "text, calls = FunctionCallParser(tools, 'qwen25').parse_non_stream("
        '\'hi<tool_call>\\n{"name": "f", "arguments": {"a": 1}}\\n</tool_call>\')\n'
        "print(json.dumps([torch.__version__, [c.name for c in calls], json.loads(calls[0].parameters)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    version, names, arguments = json.loads(done.stdout.strip().splitlines()[-1])
    assert version and names == ["f"] and arguments == {"a": 1}


def test_only_the_newest_turn_keeps_its_routed_experts():
    """Each turn's array covers the whole sequence so far: older ones are dropped, not accumulated."""
    import asyncio

    import numpy as np
    from verl.workers.rollout.replica import TokenOutput

    from slime_tau_plugin.adapters.verl.policy import VerlPolicy
    from slime_tau_plugin.engine.policy.client import FinishReason

    class Manager:
        async def generate(self, request_id, *, prompt_ids, sampling_params):
            n = len(prompt_ids) + 2
            return TokenOutput(token_ids=[5, 6], log_probs=[-0.1, -0.2], routed_experts=np.ones((n, 1, 1)))

    policy = VerlPolicy(Manager(), "r", stop_token_ids=[6])

    async def two_turns():
        return [await policy.generate([1, 2, 3], {"max_new_tokens": 2}), await policy.generate([1] * 7, {})]

    first, second = asyncio.run(two_turns())
    assert first.finish_reason is FinishReason.STOP, "a full turn that ends on a stop id is not cut"
    assert "routed_experts" not in first.meta_info and second.meta_info["routed_experts"].shape == (9, 1, 1)
    assert policy.summary().routed_experts is second.meta_info["routed_experts"]


def test_ray_imports_after_the_parsers():
    """In verl and slime, Ray is imported first; a script that imports our parsers first must still import Ray."""
    parsers = "from slime_tau_plugin.engine.chat.tool_calls import import_sglang_parsers\nimport_sglang_parsers()\n"
    code = parsers + "import ray\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-1000:]


def test_prepare_format_verl_writes_train_and_val_rows_that_load_back(tmp_path, tau2_backend):
    out = tmp_path / "data" / "train.parquet"
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "prepare", "--format", "verl", "--out", str(out)]
    done = subprocess.run(
        [*cmd, "--train", "tau2/retail/train", "--eval", "tau2/retail,airline/test"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    val = out.with_suffix(".val.parquet")
    assert f"data.train_files={out.resolve()} data.val_files={val.resolve()}" in done.stdout
    import pandas as pd

    from slime_tau_plugin.engine.config.tau_config import TauConfig

    for path, sets in ((out, [("retail", "train")]), (val, [("retail", "test"), ("airline", "test")])):
        frame = pd.read_parquet(path)
        expected = [r.task_id for d, s in sets for r in tau2_backend.task_refs(d, s)]
        assert list(frame["agent_name"].unique()) == ["tau_agent"]
        refs = [task_ref_from_extra_info(extra, TauConfig()) for extra in frame["extra_info"]]
        assert [r.task_id for r in refs] == expected
        assert [e["index"] for e in frame["extra_info"]] == list(range(len(expected)))
    leaky = subprocess.run(
        [*cmd, "--force", "--train", "tau2/retail/test", "--eval", "tau2/retail/test"], capture_output=True, text=True
    )
    assert leaky.returncode == 2 and "tau2/retail/test is used for both training and evaluation" in leaky.stderr


def test_the_agent_loop_yaml_says_which_keys_are_refused_as_the_code_does():
    from slime_tau_plugin.engine.config.keys import KEY_READERS, PROVIDED_BY, Trainer

    provided = {f"tau_{n}" for n in PROVIDED_BY[Trainer.VERL]}
    unread = {f"tau_{n}" for n, readers in KEY_READERS.items() if Trainer.VERL not in readers}
    lines = AGENT_LOOP_YAML.read_text().splitlines()

    def listed(start: str) -> set[str]:
        line = next(line for line in lines if line.startswith(start))
        return {word.strip() for word in line.split(":", 1)[1].split(",")}

    assert listed("# Refused, verl provides them:") == provided
    assert listed("# Refused, other trainers' only:") == unread - provided
    guard = listed("# Applied (the failure guard")
    assert guard == {"tau_max_failed_share", "tau_failure_window_groups"}
    tau = verl_tau_config(verl_config(), {"tau_max_failed_share": 0.25, "tau_failure_window_groups": 3})
    assert (tau.max_failed_share, tau.failure_window_groups) == (0.25, 3), "the guard's keys are accepted"


def test_a_parquet_without_verls_columns_is_refused_with_the_command_that_writes_them(tmp_path):
    import pandas as pd

    from slime_tau_plugin.adapters.verl.launch import _check_rows

    path = tmp_path / "train.parquet"
    pd.DataFrame({"prompt": ["x"]}).to_parquet(path)
    with pytest.raises(ConfigError) as refused:
        _check_rows("train_files", str(path))
    message = str(refused.value)
    assert "lacks columns ['agent_name', 'data_source', 'extra_info']" in message
    assert message.endswith("write it with slime-tau prepare --format verl") and "\n" not in message
