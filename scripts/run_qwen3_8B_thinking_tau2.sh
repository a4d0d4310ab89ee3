#!/usr/bin/env bash
# GRPO for Qwen3-8B in thinking mode on τ² (retail, airline, telecom) with slime; TAU_BENCHMARK=tau1: τ-bench v1.
# The config sets tau_reasoning_parser: qwen3 and tau_enable_thinking: true, so turns are longer than without thinking.
# A self-hosted LLM customer (SGLang on USER_SIM_GPUS) plays the user. DRY_RUN=1 checks and prints, nothing else.
#   SLIME_DIR=/root/slime bash scripts/run_qwen3_8B_thinking_tau2.sh [more train.py flags]
# Every knob is a variable, these presets included (scripts/lib/tau_settings.sh); they fit nodes of 8 x 80 GB:
# one node as is, several with NODE_ADDRS=<head>,<node 1>,... and NODE_RANK=0..N-1 (the same command on each).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/tau_launch.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/tau_launch.sh"

# The model this preset fits: Qwen/Qwen3-8B in thinking mode (rope_theta 1,000,000, slime's qwen3-8B.sh).
: "${MODEL_NAME:=Qwen3-8B}" "${MODEL_SCRIPT:=qwen3-8B.sh}" "${CONFIG_STEM:=qwen3_8B_thinking}"
: "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}" # training + colocated rollout engines | the customer (USER_SIM_GPUS= : none)
: "${MAX_TOKENS_PER_TURN:=4096}" "${ROLLOUT_MAX_CONTEXT_LEN:=32768}" # one turn, thinking included | the whole episode
# The episode bound must fit one training micro-batch: ROLLOUT_MAX_CONTEXT_LEN <= CP_SIZE * MAX_TOKENS_PER_GPU (the
# dry run checks it). CP 2 would need TP_SIZE*CP_SIZE = 4 to divide the 6 training GPUs, so this preset keeps TP 2,
# CP 1 (data-parallel 3) and budgets 32768 tokens per GPU. Estimate per 80 GB GPU: ~40 GB of Qwen3-8B weights, fp32
# gradients and the distributed Adam state (slime always shards it, here over 3 replicas), plus ~25-30 GB at the
# peak of one 32k-token micro-batch with full recompute (the fp32 vocab-parallel logits dominate); SGLang's engines
# are offloaded while Megatron trains (--colocate). Not measured: if training runs out of memory, use CP_SIZE=2
# MAX_TOKENS_PER_GPU=16384 on TRAIN_GPUS=0,1,2,3 (TP 2 x CP 2), or lower ROLLOUT_MAX_CONTEXT_LEN with it.
: "${TP_SIZE:=2}" "${CP_SIZE:=1}" "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${MAX_TOKENS_PER_GPU:=32768}"
: "${EVAL_TEMPERATURE:=1.0}" "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}" # eval: temperature | every N rollouts (and before step 0) | episodes per task

tau_main "$@"
