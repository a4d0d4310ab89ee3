#!/usr/bin/env bash
# GRPO for Qwen3-4B-Instruct-2507 on τ² (retail, airline, telecom) with slime; TAU_BENCHMARK=tau1: τ-bench v1.
# A self-hosted LLM customer (SGLang on USER_SIM_GPUS) plays the user. DRY_RUN=1 checks and prints, nothing else.
#   SLIME_DIR=/root/slime bash scripts/run_qwen3_4B_instruct_2507_tau2.sh [more train.py flags]
# Every knob is a variable (scripts/lib/tau_launch.sh lists them); these presets fit one node of 8 x 80 GB.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/tau_launch.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/tau_launch.sh"

MODEL_NAME=Qwen3-4B-Instruct-2507
MODEL_SCRIPT=qwen3-4B-Instruct-2507.sh
CONFIG_STEM=qwen3_4B_instruct_2507
: "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}" # training + colocated rollout engines | the customer (USER_SIM_GPUS= : none)
: "${TP_SIZE:=2}" "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${MAX_TOKENS_PER_GPU:=16384}"
: "${MAX_TOKENS_PER_TURN:=1024}" "${ROLLOUT_MAX_CONTEXT_LEN:=16384}" # one turn | the whole episode
: "${EVAL_TEMPERATURE:=1.0}" "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}" # eval: temperature | every N rollouts (and before step 0) | episodes per task

tau_main "$@"
