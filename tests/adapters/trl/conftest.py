"""Fixtures for the TRL front door: TRL's real ``GRPOConfig``/``GRPOTrainer``, our oracle server over HTTP, a tiny
model on the Qwen2.5 tokenizer the oracle speaks.

Every module here needs TRL (1.16.0) and torch: the main test venv has neither, so this conftest skips the whole
directory there (``scripts/test_trl.sh`` builds a venv that has them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (scripts/test_trl.sh makes a venv with it)")
pytest.importorskip("trl", reason="TRL is not installed (scripts/test_trl.sh makes a venv with it)")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="session")
def oracle_url(qwen25) -> Iterator[str]:
    """Our SGLang-protocol server playing the oracle for τ² retail train and airline test (the parity sets)."""
    from slime_tau_plugin.tools.servers import build_sglang_server
    from tests.parity import PARITY_SETS

    server = build_sglang_server("oracle", qwen25, task_sets=list(PARITY_SETS))
    server.start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def tiny_trl_model(qwen25_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random model with the Qwen2.5 tokenizer: the model TRL trains, on the oracle's token ids."""
    from slime_tau_plugin.tools.model.tiny import TinyModelSpec, make_tiny_model

    out = tmp_path_factory.mktemp("tiny-trl")
    make_tiny_model(TinyModelSpec(qwen25_dir, str(out), seed=0))
    return out
