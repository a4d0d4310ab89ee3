#!/usr/bin/env bash
# GRPO for Qwen2.5-7B-Instruct on τ² (retail, airline, telecom) with slime; TAU_BENCHMARK=tau1: τ-bench v1.
# A self-hosted LLM customer (SGLang on USER_SIM_GPUS) plays the user. DRY_RUN=1 checks and prints, nothing else.
#   SLIME_DIR=/root/slime bash scripts/run_qwen2.5_7B_instruct_tau2.sh [more train.py flags]
# Every knob is a variable, these presets included (scripts/lib/tau_settings.sh); they fit nodes of 8 x 80 GB:
# one node as is, several with NODE_ADDRS=<head>,<node 1>,... and NODE_RANK=0..N-1 (the same command on each).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/tau_launch.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/tau_launch.sh"

# The model this preset fits: Qwen/Qwen2.5-7B-Instruct (no thinking; rope_theta 1,000,000, slime's qwen2.5-7B.sh).
: "${MODEL_NAME:=Qwen2.5-7B-Instruct}" "${MODEL_SCRIPT:=qwen2.5-7B.sh}" "${CONFIG_STEM:=qwen2.5_7B_instruct}"
: "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}" # training + colocated rollout engines | the customer (USER_SIM_GPUS= : none)
: "${TP_SIZE:=2}" "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${MAX_TOKENS_PER_GPU:=16384}"
: "${MAX_TOKENS_PER_TURN:=1024}" "${ROLLOUT_MAX_CONTEXT_LEN:=16384}" # one turn | the whole episode (model max 32768)
: "${EVAL_TEMPERATURE:=1.0}" "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}" # eval: temperature | every N rollouts (and before step 0) | episodes per task

tau_main "$@"
