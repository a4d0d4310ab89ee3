#!/usr/bin/env bash
# The parser path against the SGLang that slime's image pins (slime docker/Dockerfile: v0.5.15.post1), next to
# the newest one scripts/install.sh installs. Only SGLang's pure-Python parser modules are used, so the pinned
# wheel and the xgrammar it requires go --no-deps into a side directory (.cache/, kept between runs) put first on
# PYTHONPATH; the tests that parse tool calls then run against it, and a skip (parsers not importable) fails.
# Usage: bash scripts/test_sglang_pinned.sh [pytest args]
#   SGLANG_PINNED=version     another SGLang version (default 0.5.15.post1)
#   XGRAMMAR_PINNED=version   the xgrammar that version requires (default 0.2.1, sglang 0.5.15.post1's pin)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/pip_install.sh
. scripts/lib/pip_install.sh
sglang="${SGLANG_PINNED:-0.5.15.post1}"
xgrammar="${XGRAMMAR_PINNED:-0.2.1}"
target=".cache/sglang-$sglang"
if [ ! -f "$target/.installed" ]; then
    rm -rf "$target"
    pip_install --no-deps --target "$target" \
        "sglang==$sglang" "xgrammar==$xgrammar"
    touch "$target/.installed"
fi
export PYTHONPATH="$PWD/$target${PYTHONPATH:+:$PYTHONPATH}"
python - "$sglang" <<'EOF'
import sys
from importlib.metadata import version

from slime_tau_plugin.engine.chat.tool_calls import import_sglang_parsers

fcp = import_sglang_parsers()[0]
assert version("sglang") == sys.argv[1], f"sglang {version('sglang')} is first on the path, not {sys.argv[1]}"
print(f"SGLang {version('sglang')} parsers from {sys.modules[fcp.__module__].__file__}")
EOF
TAU_REQUIRE_FIXTURES=1 python -m pytest -q -p no:cacheprovider tests/engine/chat/test_tool_calls.py tests/engine/test_agent.py \
    tests/adapters/slime/test_generate_e2e.py "$@"
