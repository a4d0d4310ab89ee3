"""The customer review in slime's own rollout loop (issue 33): runs ``scripts/slime_loop_review.py``.

It needs slime's code and a venv that runs it (never vendored; see ``scripts/slime_loop_check.py``'s docstring):
``TAU_SLIME_CHECKOUT`` (a slime checkout) and ``TAU_SLIME_PYTHON`` (that venv's python). Skipped without them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_an_invented_identifier_the_agent_acts_on_is_left_out_of_slimes_advantages() -> None:
    checkout, python = os.environ.get("TAU_SLIME_CHECKOUT"), os.environ.get("TAU_SLIME_PYTHON")
    if not (checkout and python and Path(checkout, "slime").is_dir() and Path(python).exists()):
        pytest.skip("set TAU_SLIME_CHECKOUT and TAU_SLIME_PYTHON to run slime's own rollout loop")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "scripts"), checkout])}
    out = subprocess.run(
        [python, str(ROOT / "scripts" / "slime_loop_review.py")], capture_output=True, text=True, env=env, timeout=900
    )
    lines = [line for line in out.stdout.splitlines() if not line.startswith((" - ", "nanobind"))]
    assert out.returncode == 0, "\n".join(lines[-30:]) + out.stderr[-2000:]
    assert lines[-1] == "PASS"
    summary = next(line for line in lines if line.startswith("samples "))
    assert "flagged and removed 0" not in summary
