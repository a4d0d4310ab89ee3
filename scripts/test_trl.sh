#!/usr/bin/env bash
# The TRL test command: a venv (.venv-trl, kept between runs) with CPU torch, TRL 1.16.0 (the adapter accepts
# trl>=1.16.0,<1.17; 1.16.0 is the newest on PyPI) and this package [tau2,sglang,test] plus the --no-deps packages of
# scripts/install.sh, then tests/adapters/trl (TRL's real GRPOConfig and GRPOTrainer, trained for one step on τ episodes from
# our oracle server over HTTP; one test starts two CPU processes with torch.distributed.run).
# Usage: bash scripts/test_trl.sh [pytest args]
#   TRL_VENV=path         another venv location
#   TORCH_EXTRA_INDEX=url where pip finds the CPU torch wheel when no local one is configured
#                         (e.g. https://download.pytorch.org/whl/cpu; PyPI's torch pulls GBs of CUDA)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/trainer_venv.sh
. scripts/lib/trainer_venv.sh
trainer_venv "${TRL_VENV:-.venv-trl}"
extra=()
[ -z "${TORCH_EXTRA_INDEX:-}" ] || extra=(--extra-index-url "$TORCH_EXTRA_INDEX")
trainer_install "${extra[@]}" "torch==2.13.0" "trl==1.16.0"
LITELLM_LOCAL_MODEL_COST_MAP=True TRL_EXPERIMENTAL_SILENCE=1 TAU_REQUIRE_FIXTURES=1 \
    python -m pytest -q -p no:cacheprovider tests/adapters/trl "$@"
