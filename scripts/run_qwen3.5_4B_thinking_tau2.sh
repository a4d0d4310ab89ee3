#!/usr/bin/env bash
# GRPO for Qwen3.5-4B in thinking mode on τ² (retail, airline, telecom) with slime; TAU_BENCHMARK=tau1: τ-bench v1.
# The config sets tau_tool_call_parser: qwen3_coder (Qwen3.5/3.6 call tools in XML), tau_reasoning_parser:
# qwen3-thinking (their generation prompt opens <think>) and tau_enable_thinking: true. A Qwen3.6 model runs with the
# same config: MODEL_NAME=Qwen3.6-35B-A3B MODEL_SCRIPT=qwen36-35B-A3B.sh (and a GPU split that fits it).
# A self-hosted LLM customer (SGLang on USER_SIM_GPUS) plays the user. DRY_RUN=1 checks and prints, nothing else.
#   SLIME_DIR=/root/slime bash scripts/run_qwen3.5_4B_thinking_tau2.sh [more train.py flags]
# Every knob is a variable, these presets included (scripts/lib/tau_settings.sh); they fit nodes of 8 x 80 GB:
# one node as is, several with NODE_ADDRS=<head>,<node 1>,... and NODE_RANK=0..N-1 (the same command on each).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/tau_launch.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/tau_launch.sh"

# The model this preset fits: Qwen/Qwen3.5-4B in thinking mode (rope_theta 10,000,000, vocab 248,320: slime's
# qwen3.5-4B.sh). Budgets for thinking: one turn holds its reasoning and its reply or XML call (Qwen3.5 reasons at
# length: 8192 per turn), the episode every turn, tool output and customer message of up to tau_max_turns (32768).
# Qwen3.5's template drops the reasoning of turns before the last customer message from its re-render: the held
# ids keep what the model saw (docs/templates.md). The episode bound must fit one micro-batch:
# ROLLOUT_MAX_CONTEXT_LEN <= CP_SIZE * MAX_TOKENS_PER_GPU (the dry run checks it). Not measured on GPUs: 4B weights,
# gradients and sharded Adam take ~25 GB per 80 GB GPU at TP 2; if a 32k micro-batch runs out of memory, use
# CP_SIZE=2 MAX_TOKENS_PER_GPU=16384 on TRAIN_GPUS=0,1,2,3, or lower ROLLOUT_MAX_CONTEXT_LEN with it.
: "${MODEL_NAME:=Qwen3.5-4B}" "${MODEL_SCRIPT:=qwen3.5-4B.sh}" "${CONFIG_STEM:=qwen3.5_4B_thinking}"
: "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}" # training + colocated rollout engines | the customer (USER_SIM_GPUS= : none)
: "${MAX_TOKENS_PER_TURN:=8192}" "${ROLLOUT_MAX_CONTEXT_LEN:=32768}" # one turn, thinking included | the whole episode
: "${TP_SIZE:=2}" "${CP_SIZE:=1}" "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${MAX_TOKENS_PER_GPU:=32768}"
: "${EVAL_TEMPERATURE:=1.0}" "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}" # eval: temperature | every N rollouts (and before step 0) | episodes per task

tau_main "$@"
