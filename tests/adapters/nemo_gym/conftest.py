"""Fixtures for the NeMo Gym front door: NeMo Gym's own head server and client, our oracle server, our agents.

Every module here needs nemo-gym (0.4.0, Python >= 3.12): the main test venv has neither, so this conftest skips
the whole directory there (``scripts/test_nemo_gym.sh`` builds a venv that has them).

The head server is NeMo Gym's ``HeadServer`` serving a global config (as ``gym env start`` would) that names a
vllm_model-style model server whose ``base_url`` is our oracle server, the agent ``tau_agent`` (``slime-tau
serve-gym`` in its own process, reading its entry from the head), ``tau_dead_user`` (the same agent built
standalone in this process, with an LLM user simulator whose endpoint is down) and ``tau_max_turns_2`` (standalone,
episodes cut at two turns: the parity test's limit case).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("nemo_gym", reason="nemo-gym is not installed (scripts/test_nemo_gym.sh makes a venv with it)")

from tests.parity import PARITY_CASES, ParityCase  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

AGENT = "tau_agent"
DEAD_USER_AGENT = "tau_dead_user"
MAX_TURNS_AGENT = "tau_max_turns_2"
"""An agent whose episodes end at ``tau_max_turns: 2`` (the parity test's episode cut by a limit)."""
MODEL_SERVER = "policy_model"
NEMO_RL_MODEL = "nemo_rl_policy"
"""A vllm_model entry as NeMo RL writes it: ``base_url`` lists its two (stand-in) vLLM servers."""
NEMO_RL_AGENT = "tau_nemo_rl"
NEMO_RL_CUT_AGENT = "tau_nemo_rl_max_turns_2"
"""Agents on NeMo RL's servers (``tau_policy_api: nemo-rl``), built from the head's config in this process."""
CONFIG_DICT_VAR = "NEMO_GYM_CONFIG_DICT"
"""Where a NeMo Gym process finds its global config (how ``gym env start`` hands it to the servers it spawns)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Gym:
    head: tuple[str, int]
    agent_url: str
    oracle_url: str
    nemo_rl: tuple[Any, ...] = ()
    """NeMo RL's two (stand-in) vLLM servers behind ``NEMO_RL_MODEL``."""


def _agent_entry(port: int, tau: dict, model: str = MODEL_SERVER) -> dict:
    from slime_tau_plugin.adapters.nemo_gym.serve import ENTRYPOINT

    ref = {"type": "responses_api_models", "name": model}
    body = {"entrypoint": ENTRYPOINT, "host": "127.0.0.1", "port": port, "model_server": ref, "tau": tau}
    return {"responses_api_agents": {"tau": body}}


def _wait_up(url: str, proc: subprocess.Popen | None, timeout_s: float = 180.0) -> None:
    import requests

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"slime-tau serve-gym exited with {proc.returncode}: {proc.stdout.read()[-2000:]}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.3)
    pytest.fail(f"{url} did not come up in {timeout_s:.0f} s")


@pytest.fixture(scope="session")
def oracle(qwen25, oracle_server_factory):
    """Our server with the oracle policy for the parity test's τ² sets (SGLang's /generate and vLLM's
    /v1/completions)."""
    from tests.parity import PARITY_SETS

    return oracle_server_factory(qwen25, tuple((d, s) for _, d, s in PARITY_SETS))


@pytest.fixture(scope="session")
def nemo_rl_servers(qwen25, tau2_backend) -> Iterator[tuple[Any, ...]]:
    """Two stand-ins of NeMo RL's vLLM server (``/v1/chat/completions``, ``/tokenize``), the oracle policy."""
    from slime_tau_plugin.tools.servers import oracle_scripts
    from slime_tau_plugin.tools.servers.fake_models import OracleModel
    from slime_tau_plugin.tools.servers.nemo_rl_server import NeMoRLServer
    from tests.parity import PARITY_SETS

    servers = tuple(NeMoRLServer(OracleModel(qwen25, oracle_scripts(list(PARITY_SETS)))).start() for _ in range(2))
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def gym(oracle, qwen25_dir, nemo_rl_servers) -> Iterator[Gym]:
    """NeMo Gym's head server and our agents, up."""
    from nemo_gym.server_utils import HeadServer
    from omegaconf import OmegaConf

    from slime_tau_plugin.adapters.nemo_gym.serve import app_of, build_agent

    head_port, agent_port, dead_port, cut_port = free_port(), free_port(), free_port(), free_port()
    nemo_port, nemo_cut_port = free_port(), free_port()
    nemo_tau = {"tau_tokenizer_path": qwen25_dir, "tau_policy_api": "nemo-rl"}
    dead_user = {
        "tau_tokenizer_path": qwen25_dir,
        "tau_user": "llm",
        "tau_user_base_url": f"http://127.0.0.1:{free_port()}/v1",  # nothing listens there
        "tau_user_model": "m",
        "tau_user_retries": 1,
    }
    config = {
        "head_server": {"host": "127.0.0.1", "port": head_port},
        MODEL_SERVER: {
            "responses_api_models": {
                "vllm_model": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": free_port(),
                    "base_url": f"{oracle.url}/v1",
                    "model": oracle.model_id,
                    "api_key": "none",
                }
            }
        },
        AGENT: _agent_entry(agent_port, {"tau_tokenizer_path": qwen25_dir}),
        DEAD_USER_AGENT: _agent_entry(dead_port, dead_user),
        MAX_TURNS_AGENT: _agent_entry(cut_port, {"tau_tokenizer_path": qwen25_dir, "tau_max_turns": 2}),
        NEMO_RL_MODEL: {
            "responses_api_models": {
                "vllm_model": {
                    "entrypoint": "app.py",
                    "host": "127.0.0.1",
                    "port": free_port(),
                    "base_url": [f"{server.url}/v1" for server in nemo_rl_servers],
                    "model": nemo_rl_servers[0].model_id,
                    "api_key": "dummy_key",
                }
            }
        },
        NEMO_RL_AGENT: _agent_entry(nemo_port, nemo_tau, NEMO_RL_MODEL),
        NEMO_RL_CUT_AGENT: _agent_entry(nemo_cut_port, {**nemo_tau, "tau_max_turns": 2}, NEMO_RL_MODEL),
    }
    os.environ[CONFIG_DICT_VAR] = OmegaConf.to_yaml(OmegaConf.create(config))
    head_server, head_thread, _ = HeadServer.run_webserver()
    _wait_up(f"http://127.0.0.1:{head_port}/", None)

    env = {k: v for k, v in os.environ.items() if k != CONFIG_DICT_VAR}  # it reads the config from the head
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "serve-gym", "--gym-head", f"127.0.0.1:{head_port}"]
    proc = subprocess.Popen(
        [*cmd, "--name", AGENT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )

    import uvicorn

    # standalone (no head): SGLang's /generate named by URL; the head's entry only routes Gym's client to it
    head = ("127.0.0.1", head_port)
    standalone = {
        dead_port: build_agent(DEAD_USER_AGENT, port=dead_port, tau={**dead_user, "tau_policy_url": oracle.url}),
        cut_port: build_agent(
            MAX_TURNS_AGENT,
            port=cut_port,
            tau={"tau_tokenizer_path": qwen25_dir, "tau_max_turns": 2, "tau_policy_url": oracle.url},
        ),
        nemo_port: build_agent(NEMO_RL_AGENT, head=head),  # its entry and model server read from the head
        nemo_cut_port: build_agent(NEMO_RL_CUT_AGENT, head=head),
    }
    servers = [
        uvicorn.Server(uvicorn.Config(app_of(agent), host="127.0.0.1", port=port, log_level="warning"))
        for port, agent in standalone.items()
    ]
    threads = [threading.Thread(target=server.run, daemon=True) for server in servers]
    for thread in threads:
        thread.start()
    try:
        for port in standalone:
            _wait_up(f"http://127.0.0.1:{port}/", None)
        _wait_up(f"http://127.0.0.1:{agent_port}/", proc)
        yield Gym(head, f"http://127.0.0.1:{agent_port}", oracle.url, nemo_rl_servers)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        head_server.should_exit = True
        for server in servers:
            server.should_exit = True
        for thread in [*threads, head_thread]:
            thread.join(timeout=30)


TASK = "tau2/retail/train/57"
"""A short oracle episode (no write, nothing to communicate)."""


def _row(agent: str, task: str, seed: int) -> dict:
    return {"responses_create_params": {"input": []}, "agent_ref": {"name": agent}, "task": task, "seed": seed}


async def _collect(gym, out: Path) -> dict:
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.rollout_collection import RolloutCollectionConfig, RolloutCollectionHelper

    rows = out.parent / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in [_row(AGENT, TASK, 7), _row(DEAD_USER_AGENT, TASK, 7)]))
    config = RolloutCollectionConfig(
        input_jsonl_fpath=str(rows), output_jsonl_fpath=str(out), num_repeats=2, upload_rollouts_to_wandb=False
    )
    helper = RolloutCollectionHelper()
    results = await helper.run_from_config(config)
    parity = await _collect_parity(helper, out.with_name("parity.jsonl"))
    client = helper.setup_server_client(BaseServerConfig(host=gym.head[0], port=gym.head[1]))
    played = next(r for r in results if r["agent_ref"]["name"] == AGENT)
    calls = {
        "seed": await client.post(server_name=AGENT, url_path="/seed_session", json={"task": TASK}),
        "verify": await client.post(
            server_name=AGENT,
            url_path="/verify",
            json={"responses_create_params": {"input": []}, "response": played["response"]},
        ),
        "no_task": await client.post(server_name=AGENT, url_path="/run", json=_row(AGENT, "tau2/retail", 1)),
    }
    answers = {name: (res.status, await res.json(content_type=None)) for name, res in calls.items()}
    nemo_rl = await _collect_as_nemo_rl(helper, client, gym)
    return {"results": results, "answers": answers, "parity": parity, "nemo_rl": nemo_rl}


@pytest.fixture(scope="session")
def collected(gym, tmp_path_factory) -> dict:
    """One rollout collection (2 copies of the oracle task on our agent, 2 on the dead-user agent) and a few
    client calls, in one event loop (NeMo Gym's HTTP client is one global session)."""
    out = tmp_path_factory.mktemp("gym") / "rollouts.jsonl"
    found = asyncio.run(_collect(gym, out))
    found["main"] = [json.loads(line) for line in out.read_text().splitlines()]
    found["failures"] = [json.loads(line) for line in out.with_name("rollouts_failures.jsonl").read_text().splitlines()]
    found["metrics"] = json.loads(out.with_name("rollouts_aggregate_metrics.json").read_text())
    return found


def _parity_agent(case: ParityCase) -> str:
    if not case.settings:
        return AGENT
    assert dict(case.settings) == {"tau_max_turns": 2}, f"no agent in the head's config has {case.settings}"
    return MAX_TURNS_AGENT


async def _collect_parity(helper: Any, out: Path) -> dict[str, dict]:
    """The parity cases (``tests/parity.py``) through NeMo Gym's rollout collection, one rollout each: what NeMo Gym
    keeps (``out``) and what it sets aside as failed (``<out>_failures.jsonl``), by case name."""
    from nemo_gym.rollout_collection import RolloutCollectionConfig

    rows = out.with_name("parity_rows.jsonl")
    cases = [{**_row(_parity_agent(c), c.task_name, c.seed), "parity_case": c.name} for c in PARITY_CASES]
    rows.write_text("".join(json.dumps(r) + "\n" for r in cases))
    config = RolloutCollectionConfig(
        input_jsonl_fpath=str(rows), output_jsonl_fpath=str(out), num_repeats=1, upload_rollouts_to_wandb=False
    )
    await helper.run_from_config(config)
    found: dict[str, dict] = {}
    for name, kept in ((out, True), (out.with_name("parity_failures.jsonl"), False)):
        for line in name.read_text().splitlines() if name.exists() else []:
            row = json.loads(line)
            found[row["parity_case"]] = {**row, "kept": kept}
    return found


NEMO_RL_MAX_NEW_TOKENS = 1024
"""NeMo RL's ``policy.generation.max_new_tokens`` in the rows below (``_prepare_nemo_gym_rows``)."""


async def _collect_as_nemo_rl(helper: Any, client: Any, gym: Gym) -> dict[str, Any]:
    """The parity cases on the NeMo RL agents, and the dead-user agent's task, the way NeMo RL collects them: rows
    prepared as ``_prepare_nemo_gym_rows`` does (its temperature and top_p, ``max_output_tokens`` capped by its
    ``max_new_tokens``, ``_rowidx``), sent by NeMo Gym's ``RolloutCollectionHelper.run_examples`` (what NeMo RL's
    ``NemoGym.run_rollouts`` calls), each answer or exception kept by case name."""
    from nemo_gym.config_types import BaseServerConfig

    cases = {
        c.name: _row(NEMO_RL_CUT_AGENT if c.settings else NEMO_RL_AGENT, c.task_name, c.seed) for c in PARITY_CASES
    }
    cases["dead-user"] = _row(DEAD_USER_AGENT, TASK, 7)
    rows = []
    for index, (name, row) in enumerate(cases.items()):
        params = row["responses_create_params"]
        params.update(temperature=1.0, top_p=1.0, max_output_tokens=min(4096, NEMO_RL_MAX_NEW_TOKENS))
        rows.append({**row, "_rowidx": index, "case": name})
    head = BaseServerConfig(host=gym.head[0], port=gym.head[1])
    found: dict[str, Any] = {}
    for task in helper.run_examples(rows, head):
        try:
            row, result = await task
        except Exception as exc:  # what NeMo RL would see: its _typed_gym_failure reads .status
            found[f"error-{len(found)}"] = exc
            continue
        found[row["case"]] = result
    found["servers"] = [server.chat_requests.total for server in gym.nemo_rl]
    return found
