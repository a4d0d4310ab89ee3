"""Our SGLang-protocol server as slime's router + engine: real HTTP on 127.0.0.1.

slime ends every rollout step by GETting the router's ``/workers``, POSTing ``/abort_request
{"abort_all": true}`` to each worker URL and polling ``/v1/loads?include=core`` until no request runs,
then awaiting every pending sample. These tests drive exactly those calls and read the JSON the way
slime does (``response["workers"][i]["url"]``, ``loads[i]["num_running_reqs"]``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.servers import select_task_sets
from slime_tau_plugin.tools.servers.fake_models import EchoModel, OracleModel
from tests.adapters.slime.test_generate_e2e import SAMPLING, slime_args
from tests.contracts.slime_sample import Sample
from tests.invariants import assert_sample_invariants

LATENCY_S = 30.0
"""Per-request latency of the servers that get aborted: an abort must end the wait long before it."""


def running(url: str) -> int:
    """How many requests the worker says it runs, read the way slime reads ``/v1/loads``."""
    body = httpx.get(f"{url}/v1/loads?include=core", timeout=5).json()
    return sum(load["num_running_reqs"] + load["num_waiting_reqs"] for load in body["loads"])


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def generate_in_background(url: str, rid: str) -> tuple[threading.Thread, dict[str, Any]]:
    """POST /generate from a thread; the result dict gets the body and the elapsed seconds."""
    result: dict[str, Any] = {}

    def call() -> None:
        started = time.monotonic()
        body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 64}, "return_logprob": True, "rid": rid}
        result["body"] = httpx.post(f"{url}/generate", json=body, timeout=LATENCY_S * 2).json()
        result["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, result


@pytest.fixture
def slow_echo(qwen25, serve):
    return serve(EchoModel(qwen25), latency_s=LATENCY_S)


def test_workers_lists_this_server_like_sglang_router(qwen25, serve):
    server = serve(EchoModel(qwen25))
    body = httpx.get(f"{server.url}/workers", timeout=5).json()
    assert [worker["url"] for worker in body["workers"]] == [server.url]
    worker = body["workers"][0]
    assert worker["id"] and worker["is_healthy"] is True and worker["worker_type"] == "regular"
    assert body["total"] == 1 and body["stats"]["total_workers"] == 1


def test_abort_all_ends_an_in_flight_generate_at_once(slow_echo):
    url = slow_echo.url
    assert running(url) == 0
    thread, result = generate_in_background(url, "episode-7-0")
    wait_until(lambda: running(url) == 1)  # /v1/loads counts the request while it waits
    assert httpx.post(f"{url}/abort_request", json={"abort_all": True}, timeout=5).status_code == 200
    thread.join(timeout=10)
    assert result["elapsed"] < LATENCY_S / 10, result
    meta = result["body"]["meta_info"]
    assert meta["id"] == "episode-7-0"
    assert meta["finish_reason"]["type"] == "abort"
    assert len(meta["output_token_logprobs"]) == len(result["body"]["output_ids"])
    assert running(url) == 0


def test_abort_by_rid_stops_only_matching_requests(slow_echo):
    url = slow_echo.url
    first, first_result = generate_in_background(url, "a-0")
    second, second_result = generate_in_background(url, "b-0")
    wait_until(lambda: running(url) == 2)
    httpx.post(f"{url}/abort_request", json={"rid": ""}, timeout=5)  # SGLang ignores an empty rid
    httpx.post(f"{url}/abort_request", json={"rid": "a"}, timeout=5)  # and matches rids by prefix
    first.join(timeout=10)
    assert first_result["body"]["meta_info"]["finish_reason"]["type"] == "abort"
    assert running(url) == 1 and second.is_alive()
    httpx.post(f"{url}/abort_request", json={"abort_all": True}, timeout=5)
    second.join(timeout=10)
    assert second_result["body"]["meta_info"]["finish_reason"]["type"] == "abort"


def test_flush_cache_succeeds_when_idle_and_refuses_while_requests_run(slow_echo):
    url = slow_echo.url
    assert httpx.get(f"{url}/flush_cache", timeout=5).status_code == 200  # slime's SGLangEngine.flush_cache
    assert httpx.post(f"{url}/flush_cache", timeout=5).status_code == 200
    thread, _ = generate_in_background(url, "busy-0")
    wait_until(lambda: running(url) == 1)
    assert httpx.get(f"{url}/flush_cache", timeout=5).status_code == 400  # as SGLang, with requests running
    httpx.post(f"{url}/abort_request", json={"abort_all": True}, timeout=5)
    thread.join(timeout=10)
    assert httpx.get(f"{url}/flush_cache", timeout=5).status_code == 200
    assert slow_echo.flushes == 3


@pytest.mark.parametrize("input_ids", [["a", "b"], [1, 2.5], "1 2 3", [[1, 2]], [2**63]])
def test_malformed_input_ids_get_sglangs_400_not_a_500(qwen25, serve, input_ids):
    server = serve(EchoModel(qwen25))
    response = httpx.post(f"{server.url}/generate", json={"input_ids": input_ids, "rid": "bad"}, timeout=5)
    assert response.status_code == 400
    body = response.json()
    assert (body["object"], body["type"], body["code"]) == ("error", "Bad Request", 400)
    assert "input_ids" in body["message"]
    good = httpx.post(f"{server.url}/generate", json={"input_ids": [1, 2, 3]}, timeout=5)
    assert good.status_code == 200 and good.json()["meta_info"]["finish_reason"]["type"] == "stop"


# --- slime's end-of-step abort, end to end ------------------------------------------------------


async def abort_like_slime(router_url: str) -> None:
    """slime's ``abort()``: list the router's workers, abort everything on each, wait until idle."""
    async with httpx.AsyncClient(timeout=5) as client:
        workers = (await client.get(f"{router_url}/workers")).json()["workers"]
        for url in [worker["url"] for worker in workers]:
            while True:
                await client.post(f"{url}/abort_request", json={"abort_all": True})
                loads = (await client.get(f"{url}/v1/loads?include=core")).json()["loads"]
                if sum(load["num_running_reqs"] + load["num_waiting_reqs"] for load in loads) == 0:
                    break
                await asyncio.sleep(0.05)


def test_slimes_end_of_step_abort_returns_in_flight_episodes_as_aborted(tau2_backend, qwen25, qwen25_dir, serve):
    refs = tau2_backend.task_refs("retail", "train")[:3]
    scripts = [tau2_backend.script(ref) for ref in refs]
    server = serve(OracleModel(qwen25, scripts), latency_s=LATENCY_S)
    args = slime_args(server, qwen25_dir, tau_domain="retail", tau_split="train")
    samples = []
    for i, ref in enumerate(refs):
        row = task_row(i, ref)
        samples.append(Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"abort-{i}"))

    async def step() -> float:
        pending = [asyncio.create_task(generate(args, sample, SAMPLING)) for sample in samples]
        while server.num_running < len(samples):
            await asyncio.sleep(0.02)
        started = time.monotonic()
        await abort_like_slime(server.url)
        await asyncio.gather(*pending)  # slime awaits every pending task after the abort
        return time.monotonic() - started

    elapsed = asyncio.run(step())
    assert elapsed < LATENCY_S / 10
    for sample in samples:
        assert_sample_invariants(sample)
        assert sample.status is Sample.Status.ABORTED, sample.metadata
        assert sample.metadata["termination_reason"] == "aborted"


# --- one oracle server for every benchmark, domain and split -------------------------------------


@pytest.mark.parametrize(
    ("domain", "split", "position"),
    [
        ("retail", "train", 0),
        ("retail", "test", 0),
        ("airline", "train", 1),  # id "1" is also a retail task: the instruction tells the domains apart
        ("airline", "test", -1),
        ("telecom", "test", 0),
        ("telecom", "full", -1),
    ],
)
def test_default_oracle_server_answers_every_domain_and_split(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, domain, split, position
):
    server = oracle_server_factory(qwen25, None)
    ref = tau2_backend.task_refs(domain, split)[position]
    row = task_row(0, ref)
    sample = Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"all-{domain}-{split}")
    args = slime_args(server, qwen25_dir, tau_domain=domain, tau_split=split)
    asyncio.run(generate(args, sample, SAMPLING))
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.COMPLETED, sample.metadata
    assert sample.reward == 1.0, (ref.task_id, sample.metadata.get("reward_info"))
    gold = tau2_backend.script(ref).gold_actions  # telecom's are mostly the user's (asked for, not called)
    called = sum(a.requestor == "assistant" for a in gold)
    # telecom tasks share instructions: the oracle may add read-only calls (get_details_by_id) to tell them apart
    assert gold and (
        sample.metadata["tool_calls"] >= called if domain == "telecom" else sample.metadata["tool_calls"] == called
    )


@pytest.mark.parametrize(("domain", "split", "position"), [("retail", "test", 3), ("airline", "test", 0)])
def test_default_oracle_server_answers_tau1_tasks_when_tau_bench_is_installed(
    tau2_backend, qwen25, qwen25_dir, oracle_server_factory, domain, split, position
):
    pytest.importorskip("tau_bench")
    from slime_tau_plugin.engine.envs import get_backend

    server = oracle_server_factory(qwen25, None)
    ref = get_backend("tau1").task_refs(domain, split)[position]  # v1 ids are per-split indices, like τ²'s
    row = task_row(0, ref)
    sample = Sample(prompt=row["index"], metadata=row["metadata"], session_id=f"tau1-{domain}-{split}")
    args = slime_args(server, qwen25_dir, tau_benchmark="tau1", tau_domain=domain, tau_split=split)
    asyncio.run(generate(args, sample, SAMPLING))
    assert_sample_invariants(sample)
    assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0, sample.metadata


def test_oracle_recognises_a_bare_instruction_from_an_llm_user(tau2_backend, qwen25):
    scripts = [tau2_backend.script(ref) for ref in tau2_backend.task_refs("retail", "test")]
    oracle = OracleModel(qwen25, lambda: scripts)  # built in the background; requests wait for it
    script = scripts[3]
    opening = [{"role": "system", "content": "You are a retail agent."}]
    opening.append({"role": "user", "content": script.user_instructions.strip()})
    text = oracle.template.render(opening, add_generation_prompt=True)
    first = script.gold_actions[0]
    assert oracle.reply(text).startswith(f'<tool_call>\n{{"name": "{first.name}"')
    assert oracle.index.size == len(scripts)


def test_task_sets_default_to_everything_installed_and_filters_narrow_them(tau2_backend):
    everything = select_task_sets()
    for domain in ("airline", "retail", "telecom"):
        assert {("tau2", domain, s) for s in tau2_backend.splits(domain)} <= set(everything)
    assert select_task_sets("tau2", "retail", None) == [("tau2", "retail", s) for s in tau2_backend.splits("retail")]
    assert select_task_sets(None, "telecom", "full") == [("tau2", "telecom", "full")]
    with pytest.raises(ConfigError, match="split=nope"):
        select_task_sets(None, "retail", "nope")


def test_oracle_leaves_sysconfig_first_use_to_the_callers_thread(tmp_path):
    """CPython 3.11 fills sysconfig's cache without a lock; the oracle's loader thread importing τ
    (loguru reads sysconfig) raced the caller's own imports in CI and failed with KeyError('userbase').
    The first fill must happen on the thread that builds the server, before any of ours start."""
    code = """
import sysconfig, threading
first = []
fill = sysconfig.get_config_vars
def spy(*args):
    if not first:
        first.append(threading.current_thread().name)
    return fill(*args)
sysconfig.get_config_vars = spy
from slime_tau_plugin.tools.servers import build_sglang_server
from slime_tau_plugin.engine.chat.templates import default_tokenizer_dir, load_tokenizer
server = build_sglang_server("oracle", load_tokenizer(default_tokenizer_dir()), task_sets=[("tau2", "retail", "test")])
server.policy.index
print(first)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['MainThread']", done.stdout


# --- the HTTP layer (aiohttp on the server's own loop) --------------------------------------------


@pytest.mark.serial  # asserts 16 latency waits overlap (< 4 s) and /health answers within 0.5 s of wall clock
def test_latency_waits_do_not_hold_up_other_requests(qwen25, serve):
    """``latency_s`` is slept on the server's loop: eight requests waiting 1 s each end together, and the
    server answers health checks meanwhile."""
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    policy = serve(EchoModel(qwen25), latency_s=1.0)
    user = ChatUserServer(latency_s=1.0).start()
    chat = {"messages": [{"role": "system", "content": "<scenario>Hi</scenario>"}]}
    generate_body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 8}}

    async def burst() -> tuple[float, float]:
        async with httpx.AsyncClient(timeout=30) as client:
            started = time.monotonic()
            calls = [client.post(f"{policy.url}/generate", json=generate_body) for _ in range(8)]
            calls += [client.post(f"{user.url}/v1/chat/completions", json=chat) for _ in range(8)]
            pending = asyncio.gather(*calls)
            await asyncio.sleep(0.2)
            health = time.monotonic()
            assert (await client.get(f"{policy.url}/health")).status_code == 200
            health = time.monotonic() - health
            assert all(answer.status_code == 200 for answer in await pending)
            return time.monotonic() - started, health

    try:
        elapsed, health = asyncio.run(burst())
    finally:
        user.stop()
    assert elapsed < 4.0 and health < 0.5, (elapsed, health)


def test_unknown_routes_answer_a_json_404_for_any_method(qwen25, serve):
    server = serve(EchoModel(qwen25))
    for method, path in (("GET", "/nope"), ("POST", "/nope"), ("GET", "/generate"), ("POST", "/health")):
        answer = httpx.request(method, f"{server.url}{path}", timeout=5)
        assert answer.status_code == 404 and answer.json() == {"error": {"message": f"no route {path}"}}
    assert httpx.post(f"{server.url}/generate", content=b"{", timeout=5).json() == {
        "error": {"message": "body is not JSON"}
    }


def test_a_stopped_server_cuts_its_clients_and_frees_its_port_at_once(qwen25, serve):
    """Port 0 binds a free port and ``url`` names it; ``stop`` drops kept-alive connections as a dying
    process would, and a new server binds the same port at once (``SO_REUSEADDR``)."""
    from slime_tau_plugin.tools.servers.sglang_server import SGLangServer

    first = SGLangServer(EchoModel(qwen25)).start()
    port = int(first.url.rsplit(":", 1)[1])
    assert port > 0
    with httpx.Client(timeout=5) as client:
        assert client.get(f"{first.url}/health").status_code == 200  # a kept-alive connection
        first.stop()
        with pytest.raises(httpx.TransportError):
            client.get(f"{first.url}/health")
    second = serve(EchoModel(qwen25), port=port)
    assert second.url == first.url
    assert httpx.get(f"{second.url}/health", timeout=5).json() == {"status": "ok"}
    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
        SGLangServer(EchoModel(qwen25), port=port).start()
