#!/usr/bin/env bash
# GRPO for Qwen3-4B-Instruct-2507 on τ² (retail, airline, telecom) with verl: python -m verl.trainer.main_ppo in
# async rollout mode, every row played by slime_tau_plugin.adapters.verl.agent_loop.TauAgentLoop (configs/verl/tau_agent_loop.yaml).
# A self-hosted LLM customer (SGLang on USER_SIM_GPUS) plays the user. DRY_RUN=1 checks and prints, nothing else.
#   bash scripts/run_verl_qwen3_4B_tau2.sh [more verl overrides, e.g. trainer.total_epochs=2 ++tau.max_turns=20]
# Every knob below is a variable (the environment wins); the presets fit one node of 8 x 80 GB. verl, our
# package (pip install -e .[tau2,sglang]), TransferQueue (verl's V1 data path) and pandas/pyarrow must be importable
# by $PYTHON. Tested with verl 0.9.1 on CPU (tests/adapters/verl: the agent loop, V1's AgentLoopWorkerTQ + TransferQueue
# 0.1.11, the batch trainer's worker, tau_grpo, the guard; no GPU run yet). verl 0.9.1's sglang extra pins SGLang
# 0.5.12; our tool-call parsers are tested with SGLang 0.5.23 and 0.5.15.post1. Existing parquet files must hold
# exactly TRAIN_SETS / EVAL_SETS (a file written for other sets is refused). verl's fully-async and one-step-off
# recipes are refused (their trainers run neither the guard nor τ's metrics).
set -euo pipefail
REPO_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
# the process helpers of the slime scripts: tau_start_process (own process group, PID recorded), the watchdog
# tau_watch / tau_check_procs (a started process that dies stops the run with its log's last lines), tau_check_stale
# shellcheck source-path=SCRIPTDIR source=lib/tau_launch.sh
source "$REPO_DIR/scripts/lib/tau_launch.sh"

: "${DRY_RUN:=0}" "${PYTHON:=python3}"
: "${MODEL_PATH:=/root/Qwen3-4B-Instruct-2507}"                  # HF weights: actor, rollout engines, tokenizer
: "${TRAIN_SETS:=tau2/retail,airline,telecom/train}" "${EVAL_SETS:=tau2/retail,airline,telecom/test}"
: "${DATA_DIR:=$REPO_DIR/data/verl}" "${TRAIN_FILE:=$DATA_DIR/tau2_train.parquet}" "${VAL_FILE:=${TRAIN_FILE%.parquet}.val.parquet}"
: "${AGENT_LOOP_CONFIG:=$REPO_DIR/configs/verl/tau_agent_loop.yaml}"
: "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}"           # actor + colocated rollout engines | the customer (USER_SIM_GPUS= : none, TAU_USER=scripted)
: "${ROLLOUT_ENGINE:=sglang}" "${ROLLOUT_TP:=1}" "${ROLLOUT_MEM:=0.6}" "${AGENT_WORKERS:=8}"
# budgets: τ² prompts (policy + tools + first user turn) are ~5k tokens for retail/airline, ~7.6k for telecom;
# the response budget holds every model turn and every tool/user message of an episode
: "${MAX_PROMPT_LEN:=8192}" "${MAX_RESPONSE_LEN:=8192}" "${MAX_TOKENS_PER_TURN:=1024}" "${MAX_TURNS:=30}"
: "${TRAIN_BATCH_SIZE:=24}" "${N_SAMPLES:=8}" "${PPO_MINI_BATCH_SIZE:=24}" "${LR:=1e-6}"
: "${TOTAL_EPOCHS:=15}" "${SAVE_FREQ:=20}" "${KEEP_CHECKPOINTS:=3}"  # checkpoints: every SAVE_FREQ steps, the newest N kept (0: all)
: "${TEST_FREQ:=10}" "${VAL_SAMPLES:=4}" "${EVAL_TEMPERATURE:=1.0}"  # eval: before step 0 and every TEST_FREQ steps | episodes per task | temperature
: "${TAU_USER:=llm}"                                                 # llm (the server below) or scripted (no LLM)
: "${USER_SIM_MODEL:=/root/Qwen3-30B-A3B-Instruct-2507}" "${USER_SIM_HOST:=127.0.0.1}" "${USER_SIM_PORT:=30010}"
: "${USER_SIM_MEM_FRACTION:=0.85}" "${USER_SIM_TIMEOUT_S:=1200}" "${USER_SIM_MODEL_NAME:=$(basename -- "$USER_SIM_MODEL")}"
# EXPERIMENT names the run across restarts: its checkpoints (CKPT_DIR) and wandb run; the same command resumes
# from CKPT_DIR's newest checkpoint (trainer.resume_mode=auto) and logs on to the same wandb run.
: "${EXPERIMENT:=verl_qwen3_4B_tau2}" "${CKPT_DIR:=$REPO_DIR/runs/checkpoints/$EXPERIMENT}"
: "${RUN_NAME:=${EXPERIMENT}_$(date +%Y%m%d_%H%M%S)}" "${RUN_DIR:=$REPO_DIR/runs/$RUN_NAME}"
: "${WANDB_PROJECT:=slime-tau-verl}" "${WANDB_RUN_ID:=}" "${CLEAN_STALE:=0}" "${TAU_WATCH_INTERVAL_S:=5}"
: "${TAU_STATE_DIR:=$(dirname -- "$RUN_DIR")/.launch_state}"
USER_SIM_BASE_URL="http://$USER_SIM_HOST:$USER_SIM_PORT/v1"
VERL_EXTERNAL=slime_tau_plugin.adapters.verl.register # verl imports it in each of its processes (import verl)

log() { printf '[verl-tau] %s\n' "$*"; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}
count() { local IFS=','; local -a items; read -r -a items <<<"$1"; echo "${#items[@]}"; }
quote() { if [[ $1 =~ ^[A-Za-z0-9_./:,=@%+-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi; }

NUM_TRAIN_GPUS=$(count "$TRAIN_GPUS")
[[ $TAU_USER != llm || -n $USER_SIM_GPUS ]] ||
    die "TAU_USER=llm starts the user-simulator server on USER_SIM_GPUS, but USER_SIM_GPUS is empty; set it, or TAU_USER=scripted"
[[ $KEEP_CHECKPOINTS =~ ^[0-9]+$ ]] || die "KEEP_CHECKPOINTS=$KEEP_CHECKPOINTS; expected a whole number (0: keep all)"
for gpu in ${TRAIN_GPUS//,/ }; do
    [[ $TAU_USER != llm || ,$USER_SIM_GPUS, != *",$gpu,"* ]] ||
        die "GPU $gpu is in both TRAIN_GPUS=$TRAIN_GPUS and USER_SIM_GPUS=$USER_SIM_GPUS; give each its own GPUs"
done
[[ $TAU_USER == llm || $TAU_USER == scripted ]] || die "TAU_USER=$TAU_USER is unknown; expected llm or scripted"
((MAX_TOKENS_PER_TURN < MAX_RESPONSE_LEN)) ||
    die "MAX_TOKENS_PER_TURN=$MAX_TOKENS_PER_TURN (one turn) must be below MAX_RESPONSE_LEN=$MAX_RESPONSE_LEN (whole episode)"

OVERRIDES=(
    # verl 0.9's V1 trainer in its own sync mode; τ's failure guard, step metrics and validation pass^k ride its
    # public sampler hook (slime_tau_plugin.adapters.verl.sampler, loaded by name; sampler_kwargs.tau_trainer hands
    # it the config it needs). tau_grpo is verl's GRPO with failed episodes left out (any tau_<estimator> works:
    # tau_rloo, tau_reinforce_plus_plus...; registered by $VERL_EXTERNAL)
    trainer.use_v1=true trainer.v1.trainer_mode=sync
    trainer.v1.sampler.custom_sampler.path=pkg://slime_tau_plugin.adapters.verl.sampler
    trainer.v1.sampler.custom_sampler.name=TauReplayBuffer
    '+trainer.v1.sampler.sampler_kwargs.tau_trainer={data: ${data}, actor_rollout_ref: {rollout: ${actor_rollout_ref.rollout}}, tau: ${oc.select:tau,null}}'
    algorithm.adv_estimator=tau_grpo algorithm.use_kl_in_reward=false
    "data.train_files=$TRAIN_FILE" "data.val_files=$VAL_FILE" "data.train_batch_size=$TRAIN_BATCH_SIZE"
    "data.max_prompt_length=$MAX_PROMPT_LEN" "data.max_response_length=$MAX_RESPONSE_LEN"
    data.filter_overlong_prompts=false data.truncation=error data.return_raw_chat=true
    "actor_rollout_ref.model.path=$MODEL_PATH" actor_rollout_ref.model.use_remove_padding=true
    actor_rollout_ref.model.enable_gradient_checkpointing=true
    "actor_rollout_ref.actor.optim.lr=$LR" "actor_rollout_ref.actor.ppo_mini_batch_size=$PPO_MINI_BATCH_SIZE"
    actor_rollout_ref.actor.use_dynamic_bsz=true
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$((2 * (MAX_PROMPT_LEN + MAX_RESPONSE_LEN)))"
    actor_rollout_ref.actor.use_kl_loss=false actor_rollout_ref.actor.entropy_coeff=0
    actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28
    actor_rollout_ref.actor.loss_agg_mode=token-mean
    "actor_rollout_ref.rollout.name=$ROLLOUT_ENGINE" actor_rollout_ref.rollout.mode=async
    "actor_rollout_ref.rollout.n=$N_SAMPLES" "actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP"
    "actor_rollout_ref.rollout.gpu_memory_utilization=$ROLLOUT_MEM" actor_rollout_ref.rollout.calculate_log_probs=true
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=$((2 * (MAX_PROMPT_LEN + MAX_RESPONSE_LEN)))"
    "actor_rollout_ref.rollout.val_kwargs.n=$VAL_SAMPLES" actor_rollout_ref.rollout.val_kwargs.do_sample=true
    "actor_rollout_ref.rollout.val_kwargs.temperature=$EVAL_TEMPERATURE"
    actor_rollout_ref.rollout.multi_turn.enable=true
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=$MAX_TURNS"
    "actor_rollout_ref.rollout.agent.agent_loop_config_path=$AGENT_LOOP_CONFIG"
    "actor_rollout_ref.rollout.agent.num_workers=$AGENT_WORKERS"
    "++tau.max_tokens_per_turn=$MAX_TOKENS_PER_TURN" "++tau.user=$TAU_USER"
)
[[ $TAU_USER != llm ]] || OVERRIDES+=("++tau.user_base_url=$USER_SIM_BASE_URL" "++tau.user_model=$USER_SIM_MODEL_NAME")
LOGGER='["console"]'
[[ -z ${WANDB_API_KEY:-} ]] || LOGGER='["console","wandb"]' # wandb reads the key from the environment
OVERRIDES+=(
    "trainer.n_gpus_per_node=$NUM_TRAIN_GPUS" trainer.nnodes=1 "trainer.total_epochs=$TOTAL_EPOCHS"
    "trainer.test_freq=$TEST_FREQ" "trainer.save_freq=$SAVE_FREQ" "trainer.default_local_dir=$CKPT_DIR"
    trainer.resume_mode=auto "trainer.max_actor_ckpt_to_keep=$( ((KEEP_CHECKPOINTS > 0)) && echo "$KEEP_CHECKPOINTS" || echo null)"
    trainer.val_before_train=true trainer.critic_warmup=0 "trainer.logger=$LOGGER"
    "trainer.project_name=$WANDB_PROJECT" "trainer.experiment_name=$EXPERIMENT"
    "$@"
)
TRAIN_CMD=("$PYTHON" -m verl.trainer.main_ppo "${OVERRIDES[@]}")
USER_SIM_CMD=("$PYTHON" -m sglang.launch_server --model-path "$USER_SIM_MODEL" --served-model-name "$USER_SIM_MODEL_NAME"
    --tp-size "$(count "${USER_SIM_GPUS:-0}")" --host "$USER_SIM_HOST" --port "$USER_SIM_PORT"
    --mem-fraction-static "$USER_SIM_MEM_FRACTION" --tool-call-parser qwen25)

# τ tasks as verl rows, written once by `slime-tau prepare --format verl` (train + OUT.val.parquet)
prepare_data() {
    if [[ -f $TRAIN_FILE && -f $VAL_FILE ]]; then
        log "data: $TRAIN_FILE and $VAL_FILE exist (delete them to write them again)"
        return
    fi
    local args=(--format verl --out "$TRAIN_FILE" --force) spec
    for spec in $TRAIN_SETS; do args+=(--train "$spec"); done
    for spec in $EVAL_SETS; do args+=(--eval "$spec"); done
    if [[ $VAL_FILE != "${TRAIN_FILE%.parquet}.val.parquet" ]]; then
        die "VAL_FILE=$VAL_FILE is missing and prepare writes ${TRAIN_FILE%.parquet}.val.parquet; unset VAL_FILE"
    elif [[ $DRY_RUN == 1 ]]; then
        log "data: missing; a real run first runs: slime-tau prepare ${args[*]}"
    else
        "$PYTHON" -m slime_tau_plugin.tools.cli prepare "${args[@]}"
    fi
}

[[ $DRY_RUN != 1 ]] || log "dry run: checks and commands only; nothing is started or written"
# every missing path at once, before anything is written (a dry run lists them; a real run stops)
MISSING=()
[[ -e $MODEL_PATH ]] || MISSING+=("MODEL_PATH=$MODEL_PATH (no such file or directory)")
[[ $TAU_USER != llm || $USER_SIM_MODEL != /* || -e $USER_SIM_MODEL ]] ||
    MISSING+=("USER_SIM_MODEL=$USER_SIM_MODEL (no such file or directory; the user-simulator server loads it)")
if ((${#MISSING[@]})); then
    [[ $DRY_RUN == 1 ]] || die "missing before a real run: $(printf '%s; ' "${MISSING[@]}")"
    for item in "${MISSING[@]}"; do log "missing (a real run stops here): $item"; done
fi
prepare_data
CHECK='import os, sys
from slime_tau_plugin.engine.errors import ConfigError
try:
    from slime_tau_plugin.adapters.verl.launch import check_launch
    print(check_launch(sys.argv[1:], train_sets=os.environ["TRAIN_SETS"], eval_sets=os.environ["EVAL_SETS"]))
except ConfigError as exc:
    sys.exit(f"error: {exc}")
except ImportError as exc:
    sys.exit(f"error: {sys.executable} cannot import verl and slime_tau_plugin ({exc}); set PYTHON")'
verdict=$(TRAIN_SETS=$TRAIN_SETS EVAL_SETS=$EVAL_SETS VERL_USE_EXTERNAL_MODULES=$VERL_EXTERNAL LITELLM_LOCAL_MODEL_COST_MAP=True "$PYTHON" -c "$CHECK" "${OVERRIDES[@]}" 2>&1 | tail -n 1) || true
[[ $verdict == "verl config OK"* ]] || die "${verdict#error: }"
log "$verdict"
if [[ -f $CKPT_DIR/latest_checkpointed_iteration.txt ]]; then
    log "checkpoints: $CKPT_DIR holds step $(tr -d '[:space:]' <"$CKPT_DIR/latest_checkpointed_iteration.txt"); the run resumes from it"
else
    log "checkpoints: none in $CKPT_DIR yet; the run starts from MODEL_PATH (every $SAVE_FREQ steps, the newest $KEEP_CHECKPOINTS kept; 0 = all)"
fi
if [[ -n ${WANDB_API_KEY:-} ]]; then # verl's wandb.init reads WANDB_RUN_ID / WANDB_RESUME from the environment
    WANDB_ID_FILE="${CKPT_DIR%/}.wandb_run_id"
    if [[ -z $WANDB_RUN_ID && -s $WANDB_ID_FILE && -f $CKPT_DIR/latest_checkpointed_iteration.txt ]]; then
        WANDB_RUN_ID=$(tr -d '[:space:]' <"$WANDB_ID_FILE")
        log "wandb: resuming run $WANDB_RUN_ID ($WANDB_ID_FILE)"
    elif [[ -z $WANDB_RUN_ID ]]; then
        WANDB_RUN_ID=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(4))')
        log "wandb: new run $WANDB_RUN_ID (kept in $WANDB_ID_FILE for a resumed run)"
        [[ $DRY_RUN == 1 ]] || { mkdir -p -- "$(dirname -- "$WANDB_ID_FILE")" && printf '%s\n' "$WANDB_RUN_ID" >"$WANDB_ID_FILE"; }
    fi
    export WANDB_RUN_ID WANDB_RESUME=allow
fi

print_commands() {
    if [[ $TAU_USER == llm ]]; then
        printf 'user simulator (GPUs %s, log %s):\n  CUDA_VISIBLE_DEVICES=%s' "$USER_SIM_GPUS" "$RUN_DIR/user_sim.log" "$USER_SIM_GPUS"
        for word in "${USER_SIM_CMD[@]}"; do printf ' %s' "$(quote "$word")"; done
        printf '\n  then poll http://%s:%s/health for up to %ss\n' "$USER_SIM_HOST" "$USER_SIM_PORT" "$USER_SIM_TIMEOUT_S"
    fi
    printf 'train command (GPUs %s):\n  CUDA_VISIBLE_DEVICES=%s VERL_USE_EXTERNAL_MODULES=%s LITELLM_LOCAL_MODEL_COST_MAP=True %s %s %s' \
        "$TRAIN_GPUS" "$TRAIN_GPUS" "$VERL_EXTERNAL" "$(quote "${TRAIN_CMD[0]}")" "${TRAIN_CMD[1]}" "${TRAIN_CMD[2]}"
    for word in "${TRAIN_CMD[@]:3}"; do printf ' \\\n    %s' "$(quote "$word")"; done
    printf '\n'
}

if [[ $DRY_RUN == 1 ]]; then
    print_commands
    exit 0
fi

command -v curl >/dev/null 2>&1 || die "curl is not on PATH; the script polls the user simulator's /health with it"
tau_check_stale
mkdir -p "$RUN_DIR"
print_commands >"$RUN_DIR/commands.txt"
TAU_PROC_NAMES=() TAU_PROC_PIDS=() TAU_PROC_LOGS=()
tau_maintain() { :; } # verl prunes its own checkpoints (trainer.max_actor_ckpt_to_keep)
trap tau_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tau_record_pid launcher "$$"
if [[ $TAU_USER == llm ]]; then
    health="http://$USER_SIM_HOST:$USER_SIM_PORT/health"
    ! curl -sf -o /dev/null --max-time 5 "$health" ||
        die "something already answers on $health; set USER_SIM_PORT to a free port (this script talks only to a server it started)"
    log "starting the user simulator on GPUs $USER_SIM_GPUS (log $RUN_DIR/user_sim.log)"
    CUDA_VISIBLE_DEVICES=$USER_SIM_GPUS tau_start_process "the user-simulator server" user_sim "$RUN_DIR/user_sim.log" "${USER_SIM_CMD[@]}"
    start=$SECONDS
    until curl -sf -o /dev/null --max-time 5 "$health"; do
        tau_check_procs "before it was healthy"
        ((SECONDS - start < USER_SIM_TIMEOUT_S)) || die "the user simulator was not healthy after ${USER_SIM_TIMEOUT_S}s; see $RUN_DIR/user_sim.log"
        sleep 2
    done
    log "user simulator healthy at $health after $((SECONDS - start))s"
fi
log "training $RUN_NAME (commands in $RUN_DIR/commands.txt)"
CUDA_VISIBLE_DEVICES=$TRAIN_GPUS VERL_USE_EXTERNAL_MODULES=$VERL_EXTERNAL LITELLM_LOCAL_MODEL_COST_MAP=True tau_start_main "${TRAIN_CMD[@]}"
tau_watch "$TAU_SUBMIT_PID"
