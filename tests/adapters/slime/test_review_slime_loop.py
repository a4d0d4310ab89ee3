"""The customer review in slime's own rollout loop (issues 33 and 40): runs ``scripts/slime_loop_review.py`` (an
invented identifier the agent acts on) and ``scripts/slime_loop_stops.py`` (a customer that stops before the
required write).

It needs slime's code and a venv that runs it (never vendored; see ``scripts/slime_loop_check.py``'s docstring):
``TAU_SLIME_CHECKOUT`` (a slime checkout) and ``TAU_SLIME_PYTHON`` (that venv's python). Skipped without them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def run_in_slime(script: str) -> list[str]:
    """The script's stdout lines (slime's own progress lines left out), after asserting it passed."""
    checkout, python = os.environ.get("TAU_SLIME_CHECKOUT"), os.environ.get("TAU_SLIME_PYTHON")
    if not (checkout and python and Path(checkout, "slime").is_dir() and Path(python).exists()):
        pytest.skip("set TAU_SLIME_CHECKOUT and TAU_SLIME_PYTHON to run slime's own rollout loop")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "scripts"), checkout])}
    out = subprocess.run(
        [python, str(ROOT / "scripts" / script)], capture_output=True, text=True, env=env, timeout=1500
    )
    lines = [line for line in out.stdout.splitlines() if not line.startswith((" - ", "nanobind"))]
    assert out.returncode == 0, "\n".join(lines[-30:]) + out.stderr[-2000:]
    assert lines[-1] == "PASS"
    return lines


def test_an_invented_identifier_the_agent_acts_on_is_left_out_of_slimes_advantages() -> None:
    lines = run_in_slime("slime_loop_review.py")
    summary = next(line for line in lines if line.startswith("samples "))
    assert "flagged and removed 0" not in summary


def test_a_premature_stop_before_the_required_write_is_left_out_of_slimes_advantages() -> None:
    lines = run_in_slime("slime_loop_stops.py")
    summary = next(line for line in lines if line.startswith("samples "))
    assert "flagged and removed 0" not in summary
    told = next(line for line in lines if line.startswith("train rows with a required write"))
    assert "stopped instead of acting" in told
