"""Fixtures for the NeMo Gym front door: NeMo Gym's own head server and client, our oracle server, our agents.

Every module here needs nemo-gym (0.4.0, Python >= 3.12): the main test venv has neither, so this conftest skips
the whole directory there (``scripts/test_nemo_gym.sh`` builds a venv that has them).

The head server is NeMo Gym's ``HeadServer`` serving a global config (as ``gym env start`` would) that names a
vllm_model-style model server whose ``base_url`` is our oracle server, the agent ``tau_agent`` (``slime-tau
serve-gym`` in its own process, reading its entry from the head) and ``tau_dead_user`` (the same agent built
standalone in this process, with an LLM user simulator whose endpoint is down).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

pytest.importorskip("nemo_gym", reason="nemo-gym is not installed (scripts/test_nemo_gym.sh makes a venv with it)")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

AGENT = "tau_agent"
DEAD_USER_AGENT = "tau_dead_user"
MODEL_SERVER = "policy_model"
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


def _agent_entry(port: int, tau: dict) -> dict:
    from slime_tau_plugin.adapters.nemo_gym.serve import ENTRYPOINT

    ref = {"type": "responses_api_models", "name": MODEL_SERVER}
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
    """Our server with the oracle policy for τ² retail train (SGLang's /generate and vLLM's /v1/completions)."""
    return oracle_server_factory(qwen25, (("retail", "train"),))


@pytest.fixture(scope="session")
def gym(oracle, qwen25_dir) -> Iterator[Gym]:
    """NeMo Gym's head server and our two agents, up."""
    from nemo_gym.server_utils import HeadServer
    from omegaconf import OmegaConf

    from slime_tau_plugin.adapters.nemo_gym.serve import app_of, build_agent

    head_port, agent_port, dead_port = free_port(), free_port(), free_port()
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
    dead = build_agent(DEAD_USER_AGENT, port=dead_port, tau={**dead_user, "tau_policy_url": oracle.url})
    dead_server = uvicorn.Server(uvicorn.Config(app_of(dead), host="127.0.0.1", port=dead_port, log_level="warning"))
    dead_thread = threading.Thread(target=dead_server.run, daemon=True)
    dead_thread.start()
    try:
        _wait_up(f"http://127.0.0.1:{dead_port}/", None)
        _wait_up(f"http://127.0.0.1:{agent_port}/", proc)
        yield Gym(("127.0.0.1", head_port), f"http://127.0.0.1:{agent_port}", oracle.url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        dead_server.should_exit = head_server.should_exit = True
        dead_thread.join(timeout=30)
        head_thread.join(timeout=30)
