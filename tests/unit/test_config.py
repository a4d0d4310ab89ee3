"""``TauConfig`` rejects unusable settings with a message naming the field and what is expected."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slime_tau_plugin.config import LLMEndpoint, TauConfig
from slime_tau_plugin.errors import ConfigError


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"user": "llm"}, "tau_user=llm needs tau_user_base_url"),
        ({"user": "llm", "user_base_url": "http://h/v1"}, "tau_user_model"),
        ({"user": "robot"}, "tau_user='robot' is unknown; expected one of llm, scripted"),
        ({"reward_mode": "cheap"}, "tau_reward_mode='cheap' is unknown; expected one of fast, reference"),
        ({"nl_assertions": "skip"}, "tau_nl_assertions='skip' is unknown; expected one of exclude, judge"),
        ({"judge_base_url": "http://h/v1"}, "tau_judge_base_url and tau_judge_model must be set together"),
        ({"user_timeout_s": 0}, "tau_user_timeout_s=0 is invalid; expected seconds > 0"),
        ({"user_retries": 0}, "tau_user_retries=0 is invalid; expected an integer >= 1"),
    ],
)
def test_bad_settings_name_the_field(fields, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TauConfig(**fields)


def test_llm_user_endpoint_comes_from_slime_args_and_the_key_from_the_environment(monkeypatch):
    args = SimpleNamespace(
        tau_user="llm",
        tau_user_base_url="http://user:8000/v1",
        tau_user_model="qwen-user",
        tau_user_api_key_env="MY_USER_KEY",
        tau_user_retries=2,
    )
    monkeypatch.setenv("MY_USER_KEY", "sk-secret")
    config = TauConfig.from_args(args)
    endpoint = config.user_endpoint()
    assert endpoint == LLMEndpoint("http://user:8000/v1", "qwen-user", "MY_USER_KEY", 60.0, 2, 0.0)
    assert endpoint.api_key == "sk-secret"
    assert "sk-secret" not in repr(config) and "sk-secret" not in repr(endpoint)
    assert TauConfig().user_endpoint() is None
    assert TauConfig().judge_endpoint() is None


def test_env_options_built_directly_are_checked_too():
    from slime_tau_plugin.envs import EnvOptions

    with pytest.raises(ConfigError, match="reward_mode='cheap' is unknown; expected one of fast, reference"):
        EnvOptions(reward_mode="cheap")
    with pytest.raises(ConfigError, match="nl_assertions='skip' is unknown"):
        EnvOptions(nl_assertions="skip")
