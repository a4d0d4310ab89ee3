#!/usr/bin/env bash
# The verl test command: a venv (.venv-verl, kept between runs) with CPU torch, verl 0.9.1, TransferQueue (verl's V1
# data path; tests/adapters/verl/test_failures_v1.py starts a local Ray with it) and this package
# [tau2,sglang,test] plus the --no-deps packages of scripts/install.sh, then tests/adapters/verl (verl's real agent-loop
# classes and dataset against our oracle server over HTTP; the parser import next to torch).
# Usage: bash scripts/test_verl.sh [pytest args]
#   VERL_VENV=path        another venv location
#   TORCH_EXTRA_INDEX=url where pip finds the CPU torch wheel when no local one is configured
#                         (e.g. https://download.pytorch.org/whl/cpu; PyPI's torch pulls GBs of CUDA)
#   TRAINER_TEST_WORKERS=n  pytest-xdist workers (default 2: each worker imports torch and verl, CPU-bound)
# The venv is kept; with uv on PATH (scripts/lib/pip_install.sh) a new one is ~1 min from uv's cache, pip ~6 min.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/trainer_venv.sh
. scripts/lib/trainer_venv.sh
trainer_venv "${VERL_VENV:-.venv-verl}"
extra=()
[ -z "${TORCH_EXTRA_INDEX:-}" ] || extra=(--extra-index-url "$TORCH_EXTRA_INDEX")
trainer_install "${extra[@]}" "torch==2.13.0" "verl==0.9.1" "TransferQueue==0.1.11" cachetools uvicorn fastapi
LITELLM_LOCAL_MODEL_COST_MAP=True TAU_REQUIRE_FIXTURES=1 python -m pytest -q -p no:cacheprovider \
    -n "${TRAINER_TEST_WORKERS:-2}" --dist worksteal tests/adapters/verl tests/tools/model "$@"
