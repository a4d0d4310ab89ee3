"""NeMo Gym's names -> ours, without NeMo Gym: every ``base_url`` NeMo RL writes, and the row limits it sets."""

from __future__ import annotations

import pytest

from slime_tau_plugin.adapters.nemo_gym.settings import model_server_policy, sampling_params
from slime_tau_plugin.engine.choices import PolicyApi
from slime_tau_plugin.engine.errors import ConfigError

NEMO_RL_ENTRY = {"base_url": ["http://10.0.0.1:7000/v1", "http://10.0.0.2:7001/v1"], "model": "/models/q"}


def test_every_base_url_of_nemo_rls_model_server_is_played():
    url, api, model = model_server_policy("policy_model", NEMO_RL_ENTRY, "nemo-rl")
    assert url == "http://10.0.0.1:7000,http://10.0.0.2:7001" and api is PolicyApi.NEMO_RL and model == "/models/q"
    joined, _, _ = model_server_policy("m", {"base_url": "http://a:1/v1, http://b:2"}, "nemo-rl")
    assert joined == "http://a:1,http://b:2"


def test_several_base_urls_for_a_one_server_protocol_and_a_bad_api_are_one_line_errors():
    with pytest.raises(ConfigError, match="lists 2 base_urls; tau_policy_api: openai-completions plays one server"):
        model_server_policy("policy_model", NEMO_RL_ENTRY)
    with pytest.raises(ConfigError, match="tau_policy_api='vllm' is unknown"):
        model_server_policy("policy_model", NEMO_RL_ENTRY, "vllm")
    assert model_server_policy("m", {"base_url": "http://a:1/v1"})[:2] == ("http://a:1", PolicyApi.OPENAI_COMPLETIONS)


def test_nemo_rls_row_limits_are_the_episodes_sampling():
    """``_prepare_nemo_gym_rows`` writes temperature, top_p and max_output_tokens = min(row's, max_new_tokens)."""
    params = sampling_params({"temperature": 0.7, "top_p": 0.95, "max_output_tokens": 512}, 3)
    assert (params["temperature"], params["top_p"], params["max_new_tokens"], params["sampling_seed"]) == (
        0.7,
        0.95,
        512,
        3,
    )
    assert "max_new_tokens" not in sampling_params({}, None)
    with pytest.raises(ConfigError, match="max_output_tokens=0: expected an integer >= 1"):
        sampling_params({"max_output_tokens": 0}, None)
