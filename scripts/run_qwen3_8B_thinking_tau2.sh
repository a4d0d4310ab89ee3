#!/usr/bin/env bash
# GRPO for Qwen3-8B in thinking mode on τ² (retail, airline, telecom) with slime; TAU_BENCHMARK=tau1: τ-bench v1.
# The config sets tau_reasoning_parser: qwen3 and tau_enable_thinking: true, so turns are longer than without thinking.
# A self-hosted LLM customer (SGLang on USER_SIM_GPUS) plays the user. DRY_RUN=1 checks and prints, nothing else.
#   SLIME_DIR=/root/slime bash scripts/run_qwen3_8B_thinking_tau2.sh [more train.py flags]
# Every knob is a variable (scripts/lib/tau_launch.sh lists them); these presets fit one node of 8 x 80 GB.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/tau_launch.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/tau_launch.sh"

MODEL_NAME=Qwen3-8B
MODEL_SCRIPT=qwen3-8B.sh
CONFIG_STEM=qwen3_8B_thinking
: "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS:=6,7}" # training + colocated rollout engines | the customer
: "${TP_SIZE:=2}" "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${MAX_TOKENS_PER_GPU:=16384}"
: "${MAX_TOKENS_PER_TURN:=4096}" "${ROLLOUT_MAX_CONTEXT_LEN:=32768}" # one turn, thinking included | the whole episode

tau_main "$@"
