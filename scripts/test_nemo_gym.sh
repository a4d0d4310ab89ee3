#!/usr/bin/env bash
# The NeMo Gym test command: a venv (.venv-gym, kept between runs) on Python >= 3.12 with nemo-gym 0.4.0 and this
# package [tau2,sglang,test] plus the --no-deps packages of scripts/install.sh, then tests/adapters/nemo_gym (NeMo Gym's own
# head server and rollout collection against `slime-tau serve-gym` and our oracle server over HTTP).
# Usage: bash scripts/test_nemo_gym.sh [pytest args]
#   GYM_VENV=path     another venv location
#   GYM_PYTHON=path   the interpreter to make the venv with (default: python3.12 on PATH, else the newest
#                     /root/.pyenv/versions/3.12.*); nemo-gym 0.4.0 needs >= 3.12 (0.5-0.7 need >= 3.13.14)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/trainer_venv.sh
. scripts/lib/trainer_venv.sh
venv="${GYM_VENV:-.venv-gym}"

works() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }

python=""
if [ ! -x "$venv/bin/python" ]; then
  python="${GYM_PYTHON:-}"
  if [ -z "$python" ]; then
    for candidate in python3.12 $(ls -d /root/.pyenv/versions/3.12.*/bin/python 2>/dev/null | sort -V | tail -n 1); do
      if works "$candidate"; then python="$candidate"; break; fi
    done
  fi
  if ! works "$python"; then
    echo "test_nemo_gym.sh: no Python >= 3.12 found (nemo-gym needs one): put python3.12 on PATH or set GYM_PYTHON=<path>" >&2
    exit 2
  fi
fi
trainer_venv "$venv" "${python:-python3}"  # python: only used to make a venv that is not there yet
trainer_install "nemo-gym==0.4.0"
LITELLM_LOCAL_MODEL_COST_MAP=True TAU_REQUIRE_FIXTURES=1 python -m pytest -q -p no:cacheprovider tests/adapters/nemo_gym "$@"
