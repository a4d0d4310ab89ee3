"""Every injectable fault kind (``tools/faults/spec.py``) through ``generate``: real HTTP, real τ² retail, our servers.

Each test breaks one thing on purpose with the built-in injectors (``--faults``, installed env faults) and checks
what slime gets back: the status (COMPLETED when a retry absorbs a transient fault; FAILED, TRUNCATED or
ABORTED where it must), ``metadata["error"]`` naming the cause of a FAILED sample, aligned lengths
(``assert_sample_invariants``) and no exception out of ``generate``. ``tau_outage_tolerance_s: 0`` makes an
endpoint that fails every request fail its samples after the request's own tries (the outage wait is
tested apart).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.tools.faults.env import install_env_faults
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from slime_tau_plugin.tools.servers.fake_models import EchoModel, ScriptedModel
from tests.adapters.slime.test_generate_e2e import SAMPLING, make_samples, requests_of, slime_args
from tests.conftest import cli_server
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants, assert_tito
from tests.tools.cli.test_cli_rollout import assert_one_line_error, slime_tau
from tests.tools.faults.test_faults import GOOD_CALL

COMPLETED, FAILED = Sample.Status.COMPLETED, Sample.Status.FAILED
TRUNCATED, ABORTED = Sample.Status.TRUNCATED, Sample.Status.ABORTED
FAIL_FAST = {"tau_outage_tolerance_s": 0}
SHARED = {"tau_policy_timeout_s": 0.75, "tau_policy_retries": 4}
"""The settings of every episode on the shared policy server (one config: its resources are built once)."""


def injector(spec: str, target: str = "policy") -> FaultInjector:
    return FaultInjector(FaultSpec.parse(spec, seed=0), target)


def play(tau2_backend, server, tokenizer_dir, session: str, **extra) -> Sample:
    """One retail episode through slime's entry point; the invariants hold and nothing raised."""
    sample = make_samples(tau2_backend, "retail", "train", 1)[0]
    sample.session_id = f"faults-{session}-{time.monotonic_ns()}"
    args = slime_args(server, tokenizer_dir, tau_domain="retail", tau_split="train", **extra)
    assert asyncio.run(generate(args, sample, dict(SAMPLING))) is sample
    assert_sample_invariants(sample)
    return sample


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


@pytest.fixture
def policy(serve, qwen25):
    """A server of its own (an endpoint whose breaker may open) playing a two-turn retail episode (a tool call,
    then a reply) with ``spec``."""

    def start(spec: str, **kwargs):
        return serve(ScriptedModel(qwen25, [GOOD_CALL, "Done."]), faults=injector(spec), **kwargs)

    return start


@pytest.fixture(scope="module")
def _shared_server(qwen25):
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    server = SGLangServer(ScriptedModel(qwen25, [GOOD_CALL, "Done."])).start()
    yield server
    server.stop()


@pytest.fixture
def shared_policy(_shared_server):
    """One server for the faults a sample survives or that fail only it: the same URL keeps the config, so the
    episode resources are built once (a new server costs a rebuild); its injector is swapped per test."""

    def start(spec: str):
        _shared_server.faults = injector(spec)
        return _shared_server

    yield start
    _shared_server.faults = None


@pytest.fixture
def user_server():
    started: list[ChatUserServer] = []

    def start(spec: str) -> ChatUserServer:
        server = ChatUserServer(faults=injector(spec, "user")).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


# --- the policy server: the HTTP exchange ---------------------------------------------------------

TRANSIENT = [
    *[("sglang", spec) for spec in ("refuse:1@1", "reset:1@1", "http_500:1@1", "http_429=0:1@1", "slow=1.25:1@1")],
    *[("openai-completions", spec) for spec in ("refuse:1@1", "reset:1@1", "http_503:1@1")],
]


@pytest.mark.parametrize(("api", "spec"), TRANSIENT)
def test_a_transient_policy_fault_is_retried_and_the_sample_completes(
    tau2_backend, qwen25_dir, shared_policy, spec, api
):
    server = shared_policy(spec)
    sample = play(tau2_backend, server, qwen25_dir, spec, tau_policy_api=api, **SHARED)
    assert sample.status is COMPLETED, sample.metadata.get("error")
    assert sample.metadata["tool_calls"] == 1 and sample.metadata["num_turns"] == 2
    name, cap = spec.split("=")[0].split(":")[0], int(spec.rsplit("@", 1)[1])
    assert server.faults.counts() == {name: cap}
    if api == "sglang":
        assert_tito(sample, requests_of(server, sample)[-2:])  # the retried request is sent again unchanged


def test_a_429_waits_its_retry_after(tau2_backend, qwen25_dir, shared_policy):
    server = shared_policy("http_429=1:1@1")
    t0 = time.perf_counter()
    sample = play(tau2_backend, server, qwen25_dir, "429-wait", **SHARED)
    assert sample.status is COMPLETED and time.perf_counter() - t0 >= 1.0
    assert server.faults.counts() == {"http_429": 1}


@pytest.mark.parametrize(
    ("spec", "cause"),
    [
        ("refuse:1", "ServerDisconnectedError"),
        ("reset:1", "ClientPayloadError"),
        ("http_500:1", "answered 500"),
        ("http_429=0:1", "answered 429"),
        ("slow=1:1", "timed out after 0.5s"),
    ],
    ids=["refuse", "reset", "5xx", "429", "slow"],
)
def test_a_policy_fault_on_every_request_fails_the_sample_naming_it(tau2_backend, qwen25_dir, policy, spec, cause):
    server = policy(spec)
    sample = play(tau2_backend, server, qwen25_dir, spec, tau_policy_retries=2, tau_policy_timeout_s=0.5, **FAIL_FAST)
    assert sample.status is FAILED and sample.metadata["termination_reason"] == "policy_error"
    assert cause in sample.metadata["error"], sample.metadata["error"]
    assert sum(server.faults.counts().values()) == 2  # both tries met the fault


@pytest.mark.parametrize("api", ["sglang", "openai-completions"])
def test_a_policy_answer_cut_short_is_asked_again(tau2_backend, qwen25_dir, shared_policy, api):
    """A 2xx body that is not JSON (a proxy or a restarting server cut it) is retried: generation is stateless."""
    sample = play(
        tau2_backend, shared_policy("invalid_json:1@1"), qwen25_dir, f"json-{api}", tau_policy_api=api, **SHARED
    )
    assert sample.status is COMPLETED, sample.metadata.get("error")
    assert sample.metadata["net_retries"] == 1


@pytest.mark.parametrize("api", ["sglang", "openai-completions"])
def test_a_policy_answering_only_cut_bodies_fails_the_sample_naming_it(tau2_backend, qwen25_dir, shared_policy, api):
    server = shared_policy("invalid_json:1")
    sample = play(
        tau2_backend, server, qwen25_dir, f"json-all-{api}", tau_policy_api=api, tau_policy_retries=2, **FAIL_FAST
    )
    assert sample.status is FAILED and sample.metadata["termination_reason"] == "policy_error"
    assert sample.metadata["error"].startswith("PolicyProtocolError") and "non-JSON" in sample.metadata["error"]


# --- the policy server: what it generates ---------------------------------------------------------


@pytest.mark.parametrize("api", ["sglang", "openai-completions"])
def test_ids_and_logprobs_of_different_lengths_fail_the_sample(tau2_backend, qwen25_dir, shared_policy, api):
    server = shared_policy("logprob_mismatch:1@1")
    sample = play(tau2_backend, server, qwen25_dir, f"mismatch-{api}", tau_policy_api=api, **SHARED)
    assert sample.status is FAILED and sample.metadata["termination_reason"] == "policy_error"
    assert "PolicyProtocolError" in sample.metadata["error"]
    assert "log-probs" in sample.metadata["error"] or "output_token_logprobs" in sample.metadata["error"]


@pytest.mark.parametrize("api", ["sglang", "openai-completions"])
def test_a_context_length_400_truncates_the_sample(tau2_backend, qwen25_dir, shared_policy, api):
    server = shared_policy("context_length:1@1")
    sample = play(tau2_backend, server, qwen25_dir, f"context-{api}", tau_policy_api=api, **SHARED)
    assert sample.status is TRUNCATED and sample.metadata["termination_reason"] == "context_length"
    assert sum(sample.loss_mask) == 0


@pytest.mark.parametrize("api", ["sglang", "openai-completions"])
@pytest.mark.parametrize("kind", ["abort", "abort_all"])
def test_an_engine_abort_aborts_the_sample(tau2_backend, qwen25_dir, shared_policy, kind, api):
    server = shared_policy(f"{kind}:1@1")
    sample = play(tau2_backend, server, qwen25_dir, f"{kind}-{api}", tau_policy_api=api, **SHARED)
    assert sample.status is ABORTED and sample.metadata["termination_reason"] == "aborted"
    assert server.faults.counts() == {kind: 1}


def test_an_abort_all_ends_every_request_in_flight(tau2_backend, qwen25, qwen25_dir, serve):
    """Three episodes wait in the server's latency together; the first to finish aborts all the others."""
    server = serve(ScriptedModel(qwen25, [GOOD_CALL, "Done."]), faults=injector("abort_all:1@1"), latency_s=1.5)
    args = slime_args(server, qwen25_dir, tau_domain="retail", tau_split="train")
    samples = make_samples(tau2_backend, "retail", "train", 3)

    async def run_all() -> None:
        await asyncio.gather(*(generate(args, s, dict(SAMPLING)) for s in samples))

    asyncio.run(run_all())
    for sample in samples:
        assert_sample_invariants(sample)
    statuses = [sample.status for sample in samples]
    # the firing request and every one that arrived within its 1.5 s (on a loaded box one may come later)
    assert statuses.count(ABORTED) >= 2 and set(statuses) <= {ABORTED, COMPLETED}, statuses
    assert server.faults.counts() == {"abort_all": 1}


def test_an_empty_output_truncates_as_an_agent_error(tau2_backend, qwen25_dir, shared_policy):
    sample = play(tau2_backend, shared_policy("empty_output:1@1"), qwen25_dir, "empty", **SHARED)
    assert sample.status is TRUNCATED and sample.metadata["termination_reason"] == "agent_error"


def test_special_tokens_mid_turn_are_kept_as_sampled(tau2_backend, qwen25, qwen25_dir, shared_policy):
    server = shared_policy("special_tokens:1@1")
    sample = play(tau2_backend, server, qwen25_dir, "special", **SHARED)
    assert sample.status is COMPLETED, sample.metadata.get("error")
    assert_tito(sample, requests_of(server, sample))  # stored unchanged, mask 1, their own log-probs
    first_turn = sample.tokens[len(sample.tokens) - sample.response_length :][: sample.loss_mask.index(0)]
    specials = {qwen25.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    assert specials <= set(first_turn[:-1]), "inserted mid-turn, before the end of turn"


@pytest.mark.parametrize(
    ("kind", "parse_errors", "tool_calls"),
    [("malformed_call", 1, 0), ("unknown_tool", 1, 0), ("multi_call", 0, 2)],
)
def test_tool_call_faults_are_fed_back_and_counted(
    tau2_backend, qwen25_dir, shared_policy, kind, parse_errors, tool_calls
):
    server = shared_policy(f"{kind}:1@1")
    sample = play(tau2_backend, server, qwen25_dir, kind, **SHARED)
    assert sample.status is COMPLETED, sample.metadata.get("error")
    assert sample.metadata["parse_errors"] == parse_errors and sample.metadata["tool_calls"] == tool_calls
    assert_tito(sample, requests_of(server, sample))


# --- the user simulator server --------------------------------------------------------------------


@pytest.fixture(scope="module")
def echo_policy(qwen25):
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    server = SGLangServer(EchoModel(qwen25)).start()
    yield server
    server.stop()


def play_llm_user(tau2_backend, echo_policy, tokenizer_dir, user: ChatUserServer, session: str, **extra) -> Sample:
    return play(
        tau2_backend,
        echo_policy,
        tokenizer_dir,
        session,
        tau_user="llm",
        tau_user_base_url=user.base_url,
        tau_user_model="scripted-user",
        **extra,
    )


@pytest.fixture(scope="module")
def _shared_user():
    server = ChatUserServer().start()
    yield server
    server.stop()


@pytest.fixture
def shared_user(_shared_user):
    """One user server (one config, resources built once) for the faults that fail at most one sample."""

    def start(spec: str) -> ChatUserServer:
        _shared_user.faults = injector(spec, "user")
        return _shared_user

    yield start
    _shared_user.faults = None


@pytest.mark.parametrize(
    "spec", ["refuse:1@1", "reset:1@1", "http_502:1@1", "http_429=0:1@1", "slow=1.25:1@1", "empty_reply:1@1"]
)
def test_a_transient_user_fault_is_retried_and_the_sample_completes(
    tau2_backend, qwen25_dir, echo_policy, shared_user, spec
):
    user = shared_user(spec)
    sample = play_llm_user(tau2_backend, echo_policy, qwen25_dir, user, spec, tau_user_timeout_s=0.75)
    assert sample.status is COMPLETED, sample.metadata.get("error")
    assert sum(user.faults.counts().values()) == 1


@pytest.mark.parametrize(
    ("spec", "cause"),
    [
        ("invalid_json:1", "answered a body that is not JSON"),
        ("empty_reply:1", "answered with an empty message (after 2 tries)"),  # retried like any bad reply
        ("tool_calls_only:1@1", "answered with an empty message"),  # a retail user has no tools to call
    ],
    ids=["invalid-json", "empty-reply", "tool-calls-only"],
)
def test_a_user_answer_without_words_fails_the_sample_naming_it(
    tau2_backend, qwen25_dir, echo_policy, shared_user, spec, cause
):
    """An empty answer or a body cut short is final once every try got one; tool calls from a user without tools are
    final at once."""
    user = shared_user(spec)
    sample = play_llm_user(
        tau2_backend, echo_policy, qwen25_dir, user, spec, tau_user_timeout_s=0.75, tau_user_retries=2, **FAIL_FAST
    )
    assert sample.status is FAILED and sample.metadata["termination_reason"] == "user_error"
    assert "UserSimulatorError" in sample.metadata["error"] and cause in sample.metadata["error"]


@pytest.mark.parametrize(
    ("spec", "cause"), [("http_500:1", "answered 500"), ("reset:1", "ClientPayloadError")], ids=["5xx", "reset"]
)
def test_a_user_failing_every_request_fails_the_sample_naming_it(
    tau2_backend, qwen25_dir, echo_policy, user_server, spec, cause
):
    user = user_server(spec)
    sample = play_llm_user(tau2_backend, echo_policy, qwen25_dir, user, spec, tau_user_retries=2, **FAIL_FAST)
    assert sample.status is FAILED and sample.metadata["termination_reason"] == "user_error"
    assert "UserSimulatorError" in sample.metadata["error"] and cause in sample.metadata["error"]
    assert sum(user.faults.counts().values()) == 2


# --- the environment (env faults installed in this process) ---------------------------------------


@pytest.fixture
def env_faults():
    """``install_env_faults`` for the test; uninstalled after it, whatever happened."""
    yield install_env_faults
    install_env_faults(None)


@pytest.mark.serial  # asserts the failed sample comes back before a timeout or the hang would have ended
@pytest.mark.parametrize(
    ("spec", "timeout_s", "cause"),
    [
        ("env_raise:1@1", 31.0, "step failed: InjectedFaultError: injected fault env_raise in step"),
        # every env call has the timeout, creating the env too: 2.5 s leaves a loaded box room; the hang is 15 s
        ("env_hang=15:1@1", 2.5, "step timed out after 2.5s"),
        ("reward_raise:1@1", 32.0, "reward failed: InjectedFaultError: injected fault reward_raise in reward"),
    ],
    ids=["env-raise", "env-hang", "reward-raise"],
)
def test_an_env_fault_fails_the_sample_naming_it(tau2_backend, qwen25_dir, policy, env_faults, spec, timeout_s, cause):
    """Installed faults wrap the backend of resources built from then on (keyed by the wrapper); uninstalling
    them gives the same config unwrapped resources again."""
    fault = FaultSpec.parse(spec)
    env_faults(fault)
    t0 = time.perf_counter()
    sample = play(tau2_backend, policy(""), qwen25_dir, spec, tau_env_timeout_s=timeout_s)
    assert sample.status is FAILED and sample.metadata["termination_reason"] == "env_error"
    assert cause in sample.metadata["error"], sample.metadata["error"]
    # a raise fails the sample without waiting for the timeout; a hang is cut by it (the first play in a
    # process also loads the tokenizer and τ's data: seconds on a loaded box)
    hang_s = fault.rules[0].param if "hang" in spec else None
    assert time.perf_counter() - t0 < (hang_s or timeout_s)
    env_faults(None)  # off again, through the same install API
    again = play(tau2_backend, policy(""), qwen25_dir, f"{spec}-off", tau_env_timeout_s=timeout_s)
    assert again.status is COMPLETED, again.metadata.get("error")


# --- reporting and the CLI ------------------------------------------------------------------------


def test_every_server_reports_its_faults_by_kind(tau2_backend, qwen25_dir, shared_policy, user_server, echo_policy):
    server = shared_policy("http_500:1@1,reset:0")
    play(tau2_backend, server, qwen25_dir, "report", **SHARED)
    report = get_json(f"{server.url}/faults")
    assert report["target"] == "policy" and report["injected"] == {"http_500": 1, "reset": 0}
    assert report["spec"] == "http_500:1@1,reset:0" and report["seed"] == 0 and report["draws"] >= 3
    assert get_json(f"{echo_policy.url}/faults")["injected"] == {}
    user = user_server("user.empty_reply:0")
    assert get_json(f"{user.url}/faults")["target"] == "user"


def test_serve_injects_what_faults_says(qwen25_dir):
    with cli_server("--policy", "echo", "--tokenizer", qwen25_dir, "--faults", "http_503:1@2") as url:
        body = json.dumps({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 8}}).encode()
        statuses = []
        for _ in range(3):
            request = urllib.request.Request(f"{url}/generate", body, {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    statuses.append(answer.status)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
        assert statuses == [503, 503, 200]
        assert get_json(f"{url}/faults")["injected"] == {"http_503": 2}


def test_serve_with_a_bad_fault_spec_is_one_line():
    done = slime_tau(["serve", "--policy", "echo", "--faults", "http_500:0.1,slo:0.2"])
    assert_one_line_error(done, "--faults: kind 'slo' in 'slo:0.2' is unknown; expected one of", command="serve")
