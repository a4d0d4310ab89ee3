"""Without torch (the main venv), the model commands fail in one line naming the CPU wheel; the CLI never imports it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from slime_tau_plugin.tools.cli.main import main

if importlib.util.find_spec("torch") is not None:
    pytest.skip("torch is installed here: tests/tools/model covers the model commands", allow_module_level=True)


@pytest.mark.parametrize(
    "argv",
    [
        ["make-tiny-model", "--tokenizer", "tok", "--out", "m"],
        ["serve", "--model", "m"],
        ["verify", "run", "--model", "m"],
    ],
)
def test_model_commands_without_torch_name_the_cpu_wheel(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install torch==2.13.0" in err, err


def test_the_cli_and_the_model_package_import_no_torch():
    modules = "slime_tau_plugin.tools.cli.main, slime_tau_plugin.tools.model.server"
    code = f"import sys, {modules}; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
