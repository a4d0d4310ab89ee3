"""The public surface: a sorted ``__all__`` of real names, and an import that needs no slime, SGLang or τ."""

from __future__ import annotations

import inspect
import subprocess
import sys

import slime_tau_plugin


def test_all_is_sorted_and_names_real_public_members():
    names = slime_tau_plugin.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(slime_tau_plugin, name), name
    for required in ("generate", "TrainableAgentMixin", "TrainableToolCallingAgent", "agent_factory", "TauConfig"):
        assert required in names


def test_import_pulls_in_no_slime_sglang_tau_or_other_trainer():
    """Here only what this venv has can show up; ``test_layers`` reads the same from the source for all of them."""
    code = (
        "import sys, slime_tau_plugin, slime_tau_plugin.generate;"
        "heavy = [m for m in ('slime', 'sglang', 'tau2', 'tau_bench', 'torch', 'litellm', 'trl', 'verl', 'nemo_gym',"
        " 'ray') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_generate_matches_slimes_custom_function_contract():
    fn = slime_tau_plugin.generate
    assert inspect.iscoroutinefunction(fn)
    params = list(inspect.signature(fn).parameters)
    assert params[:3] == ["args", "sample", "sampling_params"] and "evaluation" in params


def test_the_engine_imports_without_any_adapter_and_generate_resolves_on_use():
    """``import slime_tau_plugin.engine`` loads no adapter; ``generate`` is slime's function however it is reached."""
    code = (
        "import sys, importlib, slime_tau_plugin.engine;"
        "print(sorted(m for m in sys.modules if m.startswith('slime_tau_plugin.adapters')));"
        "module = importlib.import_module('slime_tau_plugin.generate');"  # slime's flag path, imported first
        "import slime_tau_plugin;"
        "from slime_tau_plugin import generate;"
        "print(generate is module.generate is slime_tau_plugin.generate, generate.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "True slime_tau_plugin.adapters.slime.generate"
