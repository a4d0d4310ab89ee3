"""How a τ² domain's build failure reads (``envs/tau2_build.py``): one line with the domain, the piece and the fix.

The exceptions are the real ones τ³'s banking_knowledge raises (``tests/engine/envs/tau3`` builds it for real with
upstream τ³).
"""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.envs.tau2_build import build_error


def raised(exc: Exception) -> Exception:
    """``exc`` as it arrives: raised and caught, with its traceback."""
    try:
        raise exc
    except Exception as caught:
        return caught


def test_a_missing_module_names_the_extra_that_installs_it():
    error = str(build_error("banking_knowledge", raised(ModuleNotFoundError("no", name="rank_bm25")), "bm25", "1.0.1"))
    assert error == (
        "domain (benchmark tau2)='banking_knowledge' cannot be built by the installed tau2 1.0.1 with "
        "tau_retrieval_variant=bm25: it needs the Python module rank_bm25; pip install 'slime-tau-plugin[banking]' "
        "(rank-bm25)"
    )
    other = str(build_error("shop", raised(ModuleNotFoundError("no", name="faiss.swig")), None, "1.0.1"))
    assert other.endswith("it needs the Python module faiss; pip install faiss") and "retrieval" not in other


def test_a_missing_key_names_the_key_and_the_offline_variant():
    openai = pytest.importorskip("openai")
    missing = openai.OpenAIError("Missing credentials. Please pass an `api_key`, or set the `OPENAI_API_KEY` variable.")
    error = str(build_error("banking_knowledge", raised(missing), "openai_embeddings", "1.0.1"))
    assert "\n" not in error and "it needs the API key OPENAI_API_KEY; set OPENAI_API_KEY" in error
    assert error.endswith("or tau_retrieval_variant=bm25 (offline retrieval)")


def test_any_other_failure_is_its_type_and_first_line():
    exc = raised(ValueError("Unknown retrieval variant: 'x'. Available: ['bm25']\n  more detail"))
    error = str(build_error("banking_knowledge", exc, "x", "1.0.1"))
    assert error.endswith("tau_retrieval_variant=x: ValueError: Unknown retrieval variant: 'x'. Available: ['bm25']")
