"""Bad TRL settings are refused in one line naming the key; the trainer's vLLM server becomes the policy."""

from __future__ import annotations

import pytest
from trl import GRPOConfig

from slime_tau_plugin.adapters.trl.config import TRL_VERSION, check_trl_version, trl_tau_config
from slime_tau_plugin.adapters.trl.rollout import TauRollout
from slime_tau_plugin.adapters.trl.rows import task_request, trl_rows
from slime_tau_plugin.engine.choices import PolicyApi
from slime_tau_plugin.engine.errors import ConfigError


def args(tmp_path, **kw) -> GRPOConfig:
    return GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **kw)


def refused(fn, *a, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        fn(*a, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_installed_trl_is_in_the_range_and_others_are_refused():
    assert check_trl_version() == TRL_VERSION
    assert check_trl_version("1.16.1") == "1.16.1" and check_trl_version("1.16.2.dev0") == "1.16.2.dev0"
    for version in ("1.15.0", "1.17.0", "2.0.0", "nightly"):
        assert f"trl=={version} is installed" in refused(check_trl_version, version)
    assert "trl>=1.16.0,<1.17" in refused(check_trl_version, "1.17.0")


def test_unknown_and_slime_only_keys_are_refused_when_the_rollout_is_built():
    assert "did you mean tau_max_turns" in refused(TauRollout, tau_max_turn=3)
    assert "tau_routing_key_header" in refused(TauRollout, tau_routing_key_header="X-Key")
    TauRollout(tau_max_failed_share=0.1, tau_failure_window_groups=4)  # the failure guard runs under TRL
    assert "not a tau_* setting" in refused(TauRollout, max_turns=3)


def test_a_key_the_table_says_trl_does_not_read_is_refused_at_tau_rollout():
    """``engine/config/keys.py``'s KEY_READERS: slime's hooks and the verl/CLI-only conversation record are refused
    when set; at their defaults they pass."""
    message = refused(TauRollout, tau_task_record_dir="/runs/a")
    assert message == "tau_task_record_dir='/runs/a' does nothing under trl (only slime reads it); remove it"
    assert "tau_max_weight_lag=0 does nothing under trl" in refused(TauRollout, tau_max_weight_lag=0)
    assert "tau_record_messages=True does nothing under trl" in refused(TauRollout, tau_record_messages=True)
    TauRollout(tau_task_record_dir=None, tau_max_redraws=1, tau_reward_shaping=0.5)  # defaults; TRL shapes rewards


def test_a_policy_is_required(tmp_path):
    assert "tau_policy_url is unset" in refused(trl_tau_config, args(tmp_path), {}, "/tok")


def test_the_trainers_vllm_server_is_the_policy_in_server_mode(tmp_path, qwen25_dir):
    config = trl_tau_config(args(tmp_path, use_vllm=True, vllm_mode="server", vllm_server_port=8123), {}, qwen25_dir)
    assert config.policy_url == "http://0.0.0.0:8123" or config.policy_url.endswith(":8123")
    assert config.policy_api is PolicyApi.OPENAI_COMPLETIONS
    assert config.tokenizer_path == qwen25_dir


def test_a_server_trl_does_not_sync_is_refused_unless_named_off_policy(tmp_path, qwen25_dir):
    settings = {"tau_policy_url": "http://h:1"}
    message = refused(trl_tau_config, args(tmp_path), settings, qwen25_dir)
    assert "tau_policy_url='http://h:1' is a server TRL does not sync weights into" in message
    assert "off_policy=True" in message and "use_vllm=True" in message
    assert trl_tau_config(args(tmp_path), settings, qwen25_dir, off_policy=True).policy_url == "http://h:1"
    synced = args(tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url="http://h:1/")
    assert trl_tau_config(synced, settings, qwen25_dir).policy_url == "http://h:1"  # TRL's own server: on-policy
    other = args(tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url="http://h:2")
    assert "does not sync weights" in refused(trl_tau_config, other, settings, qwen25_dir)


def test_colocated_vllm_and_masking_truncations_are_refused(tmp_path):
    assert "vllm_mode='colocate'" in refused(
        trl_tau_config, args(tmp_path, use_vllm=True, vllm_mode="colocate"), {}, "/tok"
    )
    bad = args(tmp_path, mask_truncated_completions=True)
    off = {"tau_policy_url": "http://h:1"}
    assert "mask_truncated_completions" in refused(trl_tau_config, bad, off, "/tok", off_policy=True)


def test_max_completion_length_caps_the_whole_response(tmp_path, qwen25_dir):
    settings = {"tau_policy_url": "http://h:1", "tau_max_response_len": 9000}
    config = trl_tau_config(args(tmp_path, max_completion_length=2048), settings, qwen25_dir, off_policy=True)
    assert config.max_response_len == 2048
    bad = {"tau_policy_url": "http://h:1", "tau_max_turns": "many"}
    assert "max_turns" in refused(trl_tau_config, args(tmp_path), bad, qwen25_dir, off_policy=True)


def test_rows_name_their_task_and_come_back():
    from slime_tau_plugin.engine.config.tau_config import TauConfig
    from slime_tau_plugin.engine.envs import TaskRef

    rows = trl_rows([TaskRef("tau2", "retail", "train", "7")])
    assert rows == [{"prompt": "tau2/retail/train/7"}]
    assert task_request(rows[0]["prompt"], TauConfig())[1]["task_id"] == "7"
