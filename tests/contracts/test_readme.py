"""The README works as written: its Python blocks run, its tau_* YAML blocks are valid config, and the
Quick start holds exactly the two set-up commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from slime_tau_plugin.engine.config import TauConfig

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text(encoding="utf-8")) if lang == language]


def test_quick_start_has_the_two_commands():
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (commands,) = BLOCK.findall(section)
    lines = [line for line in commands[1].splitlines() if line.strip()]
    assert len(lines) == 2
    assert lines[0].endswith("bash scripts/install.sh && slime-tau rollout")
    assert lines[1].endswith("bash scripts/test.sh")


@pytest.mark.parametrize("code", blocks("python"), ids=lambda code: code.splitlines()[0][:40])
def test_python_blocks_run_as_written(code, tmp_path, tau2_backend):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Unclosed" not in done.stderr, done.stderr[-3000:]
    assert "user_stop 1.0" in done.stdout


def test_tau_yaml_blocks_are_valid_config():
    checked = 0
    for body in blocks("yaml"):
        if not re.search(r"^tau_\w+:", body, re.MULTILINE):  # slime's eval YAML excerpts, abbreviated with "..."
            continue
        values = yaml.safe_load(body)
        if not isinstance(values, dict) or not any(str(k).startswith("tau_") for k in values):
            continue
        TauConfig.from_args(SimpleNamespace(**values))  # raises on an unknown key or a bad value
        checked += 1
    assert checked >= 2
