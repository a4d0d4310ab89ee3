"""Fixtures for the verl front door: verl's real config, agent-loop classes and dataset, our oracle server.

Every module here needs verl (0.9.1, CPU torch): the main test venv has neither, so this conftest skips the
whole directory there (``scripts/test_verl.sh`` builds a venv that has them). verl is imported first, before
anything imports SGLang's parsers, as in a verl worker process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl is not installed (scripts/test_verl.sh makes a venv with it)")
pytest.importorskip("verl.experimental.agent_loop.agent_loop", reason="verl's agent loop does not import")

ROOT = Path(__file__).resolve().parents[3]
AGENT_LOOP_YAML = ROOT / "configs" / "verl" / "tau_agent_loop.yaml"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def verl_config(*overrides: str):
    """verl's ``ppo_trainer`` config composed with ``overrides``, as ``python -m verl.trainer.main_ppo`` would."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    base = [
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_YAML}",
        "data.max_prompt_length=8192",
        "data.max_response_length=8192",
    ]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=[*base, *overrides])


def refs_with_tasks(backend, domain: str, split: str, count: int | None = None) -> list:
    """Task refs carrying τ's task dump, as ``slime-tau prepare`` writes them (the episode plays the dump)."""
    import dataclasses

    refs = backend.task_refs(domain, split)[:count]
    return [dataclasses.replace(ref, task=backend.task_dump(ref)) for ref in refs]


@pytest.fixture(scope="session")
def base_verl_config():
    return verl_config()


@pytest.fixture(scope="session")
def oracle_server(qwen25):
    """Our SGLang-protocol server with the oracle model for τ² retail train and airline test."""
    from slime_tau_plugin.tools.servers import build_sglang_server

    server = build_sglang_server("oracle", qwen25, task_sets=[("tau2", "retail", "train"), ("tau2", "airline", "test")])
    server.start()
    yield server
    server.stop()
