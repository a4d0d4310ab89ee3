"""The fault spec parser and the injector's draws (pure, milliseconds)."""

from __future__ import annotations

import threading

import pytest

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.tools.faults.env import install_env_faults, install_env_faults_from_environ
from slime_tau_plugin.tools.faults.spec import (
    TRANSPORT_KINDS,
    FaultInjector,
    FaultKind,
    FaultSpec,
    injector_for,
    spec_from_env,
)


def test_a_spec_parses_targets_params_and_caps():
    spec = FaultSpec.parse("http_503:0.05, reset:0.02,slow=2.5:0.01@3,user.http_429=2:1,env_hang:0.1")
    by_name = {rule.name: rule for rule in spec.rules}
    assert by_name["http_503"].kind is FaultKind.HTTP_5XX and by_name["http_503"].param == 503
    assert by_name["slow"].param == 2.5 and by_name["slow"].cap == 3 and by_name["slow"].rate == 0.01
    assert by_name["http_429"].target == "user" and by_name["http_429"].param == 2
    assert by_name["env_hang"].param is None  # the env wrapper's default: past tau_env_timeout_s
    assert by_name["reset"].param is None and by_name["slow"].target is None
    assert str(FaultSpec.parse(str(spec))) == str(spec)
    assert [r.name for r in spec.for_target("policy")] == ["http_503", "reset", "slow"]
    assert [r.name for r in spec.for_target("user")] == ["http_503", "reset", "slow", "http_429"]
    assert [r.name for r in spec.for_target("env")] == ["env_hang"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("htp_500:0.1", "kind 'htp_500' in 'htp_500:0.1' is unknown; expected one of abort, abort_all, "),
        ("http_500", "entry 'http_500' is malformed; expected [target.]kind[=param]:rate[@cap]"),
        ("http_500:1.5", "rate '1.5' of 'http_500' must be a number in [0, 1]"),
        ("http_500:often", "rate 'often' of 'http_500' must be a number in [0, 1]"),
        ("http_500:0.1@0", "cap '0' of 'http_500' must be an integer >= 1"),
        ("http_500:0.1@two", "cap 'two' of 'http_500' must be an integer >= 1"),
        ("polcy.http_500:0.1", "target 'polcy' in 'polcy.http_500:0.1' is unknown; expected one of policy, user"),
        ("policy.env_raise:0.1", "kind 'env_raise' does not apply to target 'policy'; it applies to env"),
        ("reset=3:0.1", "kind 'reset' takes no '=' parameter; only slow, http_429, env_hang do"),
        ("slow=-1:0.1", "parameter '-1' of 'slow' must be seconds >= 0"),
        ("slow:0.1,slow:0.2", "'slow' is listed twice"),
        ("http_5xx:0.1", "kind 'http_5xx' in 'http_5xx:0.1' is unknown"),
    ],
)
def test_a_bad_spec_says_what_and_what_is_expected_in_one_line(text, message):
    with pytest.raises(ConfigError) as raised:
        FaultSpec.parse(text, source="--faults")
    assert str(raised.value).startswith("--faults: ") and message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_unknown_kind_lists_every_valid_kind():
    with pytest.raises(ConfigError) as raised:
        FaultSpec.parse("nope:1")
    for kind in FaultKind:
        if kind is not FaultKind.HTTP_5XX:
            assert kind.value in str(raised.value)
    assert "http_5NN (e.g. http_503)" in str(raised.value)


def test_a_cap_at_rate_one_injects_exactly_the_first_n():
    injector = FaultInjector(FaultSpec.parse("http_500:1.0@3"), "policy")
    drawn = [injector.draw(TRANSPORT_KINDS) for _ in range(10)]
    assert [rule is not None for rule in drawn] == [True] * 3 + [False] * 7
    assert injector.counts() == {"http_500": 3}
    assert injector.report()["draws"] == 10 and injector.report()["injected"] == {"http_500": 3}


def test_a_seed_makes_the_draws_reproducible_per_rule():
    def pattern(spec: str) -> list[str | None]:
        injector = FaultInjector(FaultSpec.parse(spec, seed=7), "policy")
        return [getattr(injector.draw(TRANSPORT_KINDS), "name", None) for _ in range(300)]

    first = pattern("http_500:0.2")
    assert first == pattern("http_500:0.2") and 30 < first.count("http_500") < 90
    assert pattern("http_500:0.2,reset:0.1").count("http_500") == first.count("http_500")  # appended rule: same hits


def test_counts_are_exact_under_threads():
    injector = FaultInjector(FaultSpec.parse("http_500:0.5,slow=0:0.5", seed=1), "user")
    hits: list[object] = []

    def work() -> None:
        for _ in range(500):
            hits.append(injector.draw(TRANSPORT_KINDS))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(injector.counts().values()) == sum(h is not None for h in hits)
    assert injector.report()["draws"] == 4000


def test_only_kinds_asked_for_are_drawn_and_targets_filter():
    injector = FaultInjector(FaultSpec.parse("abort:1,user.http_500:1"), "policy")
    assert injector.draw(TRANSPORT_KINDS) is None  # user.http_500 is not the policy's; abort is not transport
    assert injector.draw({FaultKind.ABORT}).kind is FaultKind.ABORT


def test_the_environment_variable_is_off_unless_set(monkeypatch):
    monkeypatch.delenv("TAU_FAULTS", raising=False)
    assert spec_from_env() is None and injector_for("policy", None) is None
    monkeypatch.setenv("TAU_FAULTS", "user.http_500:0.1")
    assert injector_for("policy", None) is None and injector_for("user", None).target == "user"
    assert injector_for("policy", "reset:1").rules[0].kind is FaultKind.RESET  # the flag wins
    monkeypatch.setenv("TAU_FAULTS_SEED", "x")
    with pytest.raises(ConfigError, match="TAU_FAULTS_SEED='x' must be an integer"):
        spec_from_env()


@pytest.fixture
def uninstall_env_faults():
    yield
    install_env_faults(None)


def test_env_faults_are_installed_from_the_variable_read_once(monkeypatch, uninstall_env_faults):
    monkeypatch.setenv("TAU_FAULTS", "env_raise:1@1")
    injector = install_env_faults_from_environ()
    assert shared_state().backend_wrapper.injector is injector and injector.draw({FaultKind.ENV_RAISE}) is not None
    assert injector.draw({FaultKind.ENV_RAISE}) is None  # the cap is spent
    monkeypatch.setenv("TAU_FAULTS", "reward_raise:1")
    assert shared_state().backend_wrapper.injector is injector  # read at install only, never at a draw
    monkeypatch.setenv("TAU_FAULTS", "env_raise:1@1")
    assert install_env_faults_from_environ().draw({FaultKind.ENV_RAISE}) is not None  # counted from zero again
    monkeypatch.delenv("TAU_FAULTS")
    assert install_env_faults_from_environ() is None and shared_state().backend_wrapper is None


def test_a_spec_with_no_env_fault_installs_no_wrapper(uninstall_env_faults):
    install_env_faults(FaultSpec.parse("env_hang:0.5"))
    assert shared_state().backend_wrapper is not None
    assert install_env_faults(FaultSpec.parse("http_500:1,user.empty_reply:1")) is None
    assert shared_state().backend_wrapper is None
