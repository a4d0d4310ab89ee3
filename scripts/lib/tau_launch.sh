# shellcheck shell=bash
# Shared logic of the slime τ RL launch scripts (scripts/run_*_tau2.sh). Sourced, never run on its own.
#
# A run script sources this file, presets its model's defaults and calls `tau_main "$@"`:
#   MODEL_NAME    HF directory name; the default checkpoint paths derive from it (/root/<MODEL_NAME>...)
#   MODEL_SCRIPT  slime's Megatron architecture file $SLIME_DIR/scripts/models/<MODEL_SCRIPT> (defines MODEL_ARGS)
#   CONFIG_STEM   our τ settings are configs/<CONFIG_STEM>_<TAU_BENCHMARK>.yaml (TAU_CONFIG overrides)
# Every other knob below is a variable with a default; the environment wins, then the run script's preset.
# Arguments given to the run script are appended to slime's train.py command (argparse: the last one wins).
#
# tau_main, in order: defaults -> checks (paths, GPU split, batch arithmetic, our function paths) -> τ config
# (placeholders filled, loaded into TauConfig) -> a real run stops here if a path is missing -> task data
# (slime-tau prepare, when missing) -> the commands -> with DRY_RUN=1: print them and exit 0 (no GPU, no
# slime, no Ray needed) -> otherwise: start the user-simulator SGLang server on USER_SIM_GPUS, wait for its
# /health, start a Ray head on TRAIN_GPUS, submit slime's train.py.
# On exit it stops only what it started: its Ray job, its Ray head, the server's process group.

TAU_LIB_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
TAU_REPO_DIR="$(cd -- "$TAU_LIB_DIR/../.." && pwd)"
TAU_MISSING=()

tau_log() { printf '[tau] %s\n' "$*"; }
tau_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}
# Our own Python helpers and CLI, importable from this checkout even before `pip install -e .`.
tau_py() { PYTHONPATH="$TAU_REPO_DIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$@"; }
tau_count() { local IFS=','; local -a items; read -r -a items <<<"$1"; echo "${#items[@]}"; }

tau_defaults() {
    : "${MODEL_NAME:?the run script must set MODEL_NAME}" "${MODEL_SCRIPT:?}" "${CONFIG_STEM:?}"
    : "${DRY_RUN:=0}" "${PYTHON:=python3}" "${TAU_BENCHMARK:=tau2}"
    case "$TAU_BENCHMARK" in
        tau2) : "${TRAIN_SETS:=tau2/retail,airline,telecom/train}" "${EVAL_SETS:=tau2/retail,airline,telecom/test}" ;;
        tau1) : "${TRAIN_SETS:=tau1/retail/train}" "${EVAL_SETS:=tau1/retail,airline/test}" ;;
        *) tau_die "TAU_BENCHMARK=$TAU_BENCHMARK is unknown; expected tau2 (τ²/τ³) or tau1 (τ-bench v1)" ;;
    esac
    # slime, Megatron-LM and checkpoints (the slimerl/slime image keeps them under /root)
    : "${SLIME_DIR:=}" "${MEGATRON_DIR:=/root/Megatron-LM}" "${CKPT_ROOT:=/root}"
    : "${HF_CKPT:=$CKPT_ROOT/$MODEL_NAME}"                      # HF weights: SGLang engines + tokenizer
    : "${REF_LOAD:=$CKPT_ROOT/${MODEL_NAME}_torch_dist}"       # tools/convert_hf_to_torch_dist.py output
    : "${SAVE:=$CKPT_ROOT/${MODEL_NAME}_slime_${TAU_BENCHMARK}}" "${LOAD:=$SAVE}" "${SAVE_INTERVAL:=20}"
    # data and run files
    : "${DATA_DIR:=$TAU_REPO_DIR/data}" "${TRAIN_DATA:=$DATA_DIR/${TAU_BENCHMARK}_train.jsonl}"
    : "${EVAL_CONFIG:=${TRAIN_DATA%.jsonl}.eval.yaml}"
    : "${TAU_CONFIG:=$TAU_REPO_DIR/configs/${CONFIG_STEM}_${TAU_BENCHMARK}.yaml}"
    : "${RUN_NAME:=${CONFIG_STEM}_${TAU_BENCHMARK}_$(date +%Y%m%d_%H%M%S)}" "${RUN_DIR:=$TAU_REPO_DIR/runs/$RUN_NAME}"
    # GPUs: training (+ colocated rollout engines) vs the user simulator, as CUDA device lists
    : "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS:=6,7}" "${COLOCATE:=1}"
    NUM_TRAIN_GPUS=$(tau_count "$TRAIN_GPUS")
    if [[ $COLOCATE == 1 ]]; then
        : "${ACTOR_GPUS:=$NUM_TRAIN_GPUS}"
        ROLLOUT_GPUS=$NUM_TRAIN_GPUS
    else
        : "${ACTOR_GPUS:=$((NUM_TRAIN_GPUS / 2))}"
        ROLLOUT_GPUS=$((NUM_TRAIN_GPUS - ACTOR_GPUS))
    fi
    : "${TP_SIZE:=2}" "${CP_SIZE:=1}" "${MAX_TOKENS_PER_GPU:=16384}"
    : "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${SGLANG_MEM_FRACTION:=0.7}" "${ROUTER_POLICY:=}"
    # budgets: slime's --rollout-max-response-len is a PER-TURN cap; the context bounds the whole episode
    : "${MAX_TOKENS_PER_TURN:=1024}" "${ROLLOUT_MAX_CONTEXT_LEN:=16384}"
    # GRPO with over-sampling and DAPO's dynamic filter (groups whose rewards all agree teach nothing)
    : "${NUM_ROLLOUT:=300}" "${ROLLOUT_BATCH_SIZE:=24}" "${N_SAMPLES_PER_PROMPT:=8}"
    : "${OVER_SAMPLING_BATCH_SIZE:=$((ROLLOUT_BATCH_SIZE * 2))}"
    : "${GLOBAL_BATCH_SIZE:=$((ROLLOUT_BATCH_SIZE * N_SAMPLES_PER_PROMPT))}" "${LR:=1e-6}"
    : "${DYNAMIC_FILTER:=slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std}"
    : "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}"
    # the user simulator: an SGLang OpenAI-compatible server this script starts on USER_SIM_GPUS
    : "${USER_SIM_MODEL:=$CKPT_ROOT/Qwen3-30B-A3B-Instruct-2507}" "${USER_SIM_HOST:=127.0.0.1}"
    : "${USER_SIM_PORT:=30010}" "${USER_SIM_MEM_FRACTION:=0.85}" "${USER_SIM_TOOL_CALL_PARSER:=qwen25}"
    : "${USER_SIM_EXTRA_ARGS:=}" "${USER_SIM_TIMEOUT_S:=1200}"
    : "${USER_SIM_MODEL_NAME:=$(basename -- "$USER_SIM_MODEL")}"
    USER_SIM_BASE_URL="http://$USER_SIM_HOST:$USER_SIM_PORT/v1"
    # Ray and logging
    : "${RAY_ADDRESS:=}" "${MASTER_ADDR:=127.0.0.1}" "${RAY_DASHBOARD_HOST:=0.0.0.0}" "${RAY_DASHBOARD_PORT:=8265}"
    : "${WANDB_PROJECT:=slime-tau}" "${WANDB_GROUP:=${CONFIG_STEM}_${TAU_BENCHMARK}}"
}

# A path that must exist before a real run; a dry run lists what is missing and goes on.
tau_need_path() {
    local what=$1 path=$2
    [[ -e $path ]] || TAU_MISSING+=("$what=$path (no such file or directory)")
}

tau_checks() {
    [[ $DRY_RUN == 1 || -n $SLIME_DIR ]] ||
        tau_die "SLIME_DIR is not set; point it at slime's checkout (/root/slime in the slimerl/slime image), or use DRY_RUN=1"
    if [[ -n $SLIME_DIR ]]; then
        tau_need_path SLIME_DIR/train.py "$SLIME_DIR/train.py"
        tau_need_path MODEL_SCRIPT "$SLIME_DIR/scripts/models/$MODEL_SCRIPT"
    else
        TAU_MISSING+=("SLIME_DIR (not set; MODEL_ARGS are shown as a placeholder)")
    fi
    tau_need_path MEGATRON_DIR "$MEGATRON_DIR"
    tau_need_path HF_CKPT "$HF_CKPT"
    tau_need_path REF_LOAD "$REF_LOAD"
    [[ -f $TAU_CONFIG ]] || tau_die "TAU_CONFIG=$TAU_CONFIG does not exist; expected one of $TAU_REPO_DIR/configs/*.yaml"
    local problems line
    problems=$(tau_py "$TAU_LIB_DIR/tau_config.py" functions "${TAU_FUNCTIONS[@]}") ||
        while IFS= read -r line; do TAU_MISSING+=("function $line"); done <<<"$problems"
    tau_check_layout
}

# The GPU split and batch arithmetic Megatron and slime assert on, checked before any GPU is touched.
tau_check_layout() {
    local gpu
    for gpu in ${TRAIN_GPUS//,/ }; do
        [[ ,$USER_SIM_GPUS, != *",$gpu,"* ]] ||
            tau_die "GPU $gpu is in both TRAIN_GPUS=$TRAIN_GPUS and USER_SIM_GPUS=$USER_SIM_GPUS; give each its own GPUs"
    done
    ((ACTOR_GPUS >= 1 && ROLLOUT_GPUS >= 1)) ||
        tau_die "COLOCATE=0 needs ACTOR_GPUS (now $ACTOR_GPUS) and rollout GPUs (now $ROLLOUT_GPUS) >= 1 out of TRAIN_GPUS=$TRAIN_GPUS"
    local model_parallel=$((TP_SIZE * CP_SIZE))
    ((ACTOR_GPUS % model_parallel == 0)) ||
        tau_die "ACTOR_GPUS=$ACTOR_GPUS is not a multiple of TP_SIZE*CP_SIZE=$model_parallel"
    local dp=$((ACTOR_GPUS / model_parallel))
    ((GLOBAL_BATCH_SIZE % dp == 0)) ||
        tau_die "GLOBAL_BATCH_SIZE=$GLOBAL_BATCH_SIZE is not divisible by the data-parallel size $dp (Megatron asserts it); change ROLLOUT_BATCH_SIZE or TRAIN_GPUS"
    (((ROLLOUT_BATCH_SIZE * N_SAMPLES_PER_PROMPT) % GLOBAL_BATCH_SIZE == 0)) ||
        tau_die "ROLLOUT_BATCH_SIZE*N_SAMPLES_PER_PROMPT=$((ROLLOUT_BATCH_SIZE * N_SAMPLES_PER_PROMPT)) is not a multiple of GLOBAL_BATCH_SIZE=$GLOBAL_BATCH_SIZE"
    ((OVER_SAMPLING_BATCH_SIZE >= ROLLOUT_BATCH_SIZE)) ||
        tau_die "OVER_SAMPLING_BATCH_SIZE=$OVER_SAMPLING_BATCH_SIZE must be >= ROLLOUT_BATCH_SIZE=$ROLLOUT_BATCH_SIZE (slime asserts it)"
    ((ROLLOUT_GPUS % ROLLOUT_GPUS_PER_ENGINE == 0)) ||
        tau_die "rollout GPUs ($ROLLOUT_GPUS) are not a multiple of ROLLOUT_GPUS_PER_ENGINE=$ROLLOUT_GPUS_PER_ENGINE"
    ((MAX_TOKENS_PER_TURN < ROLLOUT_MAX_CONTEXT_LEN)) ||
        tau_die "MAX_TOKENS_PER_TURN=$MAX_TOKENS_PER_TURN (per turn) must be below ROLLOUT_MAX_CONTEXT_LEN=$ROLLOUT_MAX_CONTEXT_LEN (whole episode)"
}

# Task rows and slime's eval YAML, written by our own CLI when they are not there yet. The only call of `prepare`.
tau_prepare_data() {
    local -a cmd=("$PYTHON" -m slime_tau_plugin.cli prepare --out "$TRAIN_DATA")
    local spec
    for spec in $TRAIN_SETS; do cmd+=(--train "$spec"); done
    for spec in $EVAL_SETS; do cmd+=(--eval "$spec"); done
    cmd+=(--eval-samples "$N_SAMPLES_PER_EVAL_PROMPT")
    if [[ -f $TRAIN_DATA && -f $EVAL_CONFIG ]]; then
        tau_log "data: $TRAIN_DATA and $EVAL_CONFIG exist (delete them to prepare again)"
    elif [[ $DRY_RUN == 1 ]]; then
        tau_log "data: missing; a real run first runs: ${cmd[*]}"
    else
        tau_log "data: ${cmd[*]}"
        tau_py "${cmd[@]:1}"
        [[ -f $EVAL_CONFIG ]] || tau_die "slime-tau prepare did not write $EVAL_CONFIG; set EVAL_CONFIG to the eval YAML it printed"
    fi
}

# Fill the user-simulator placeholders, validate into TauConfig, write the run copy (real runs only).
tau_render_config() {
    TAU_CONFIG_RUN="$RUN_DIR/tau_config.yaml"
    local -a out=()
    [[ $DRY_RUN == 1 ]] || out=(--out "$TAU_CONFIG_RUN")
    local verdict
    verdict=$(tau_py "$TAU_LIB_DIR/tau_config.py" render "$TAU_CONFIG" "${out[@]}" \
        --set "USER_SIM_BASE_URL=$USER_SIM_BASE_URL" --set "USER_SIM_MODEL_NAME=$USER_SIM_MODEL_NAME") || exit 1
    if [[ $verdict == user_sim=local ]]; then
        START_USER_SIM=1
        [[ -n $USER_SIM_GPUS ]] || tau_die "$TAU_CONFIG asks for the user-simulator server, but USER_SIM_GPUS is empty"
        [[ $USER_SIM_MODEL != /* ]] || tau_need_path USER_SIM_MODEL "$USER_SIM_MODEL"
        tau_log "config: $TAU_CONFIG is valid; its LLM user is the server this script starts ($USER_SIM_BASE_URL)"
    else
        START_USER_SIM=0
        tau_log "config: $TAU_CONFIG is valid; no user-simulator server is started (USER_SIM_GPUS stay idle)"
    fi
}

tau_build_commands() {
    if [[ -n $SLIME_DIR && -f $SLIME_DIR/scripts/models/$MODEL_SCRIPT ]]; then
        # shellcheck disable=SC1090
        source "$SLIME_DIR/scripts/models/$MODEL_SCRIPT" # sets MODEL_ARGS, slime's own architecture flags
    else
        MODEL_ARGS=("{MODEL_ARGS:scripts/models/$MODEL_SCRIPT}")
    fi
    local -a cluster=(--actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" --rollout-num-gpus "$ROLLOUT_GPUS"
        --num-gpus-per-node "$NUM_TRAIN_GPUS")
    [[ $COLOCATE != 1 ]] || cluster+=(--colocate)
    local -a ckpt=(--hf-checkpoint "$HF_CKPT" --ref-load "$REF_LOAD" --load "$LOAD" --save "$SAVE"
        --save-interval "$SAVE_INTERVAL")
    local -a rollout=(--prompt-data "$TRAIN_DATA" --input-key index --metadata-key metadata --rollout-shuffle
        --num-rollout "$NUM_ROLLOUT" --rollout-batch-size "$ROLLOUT_BATCH_SIZE"
        --n-samples-per-prompt "$N_SAMPLES_PER_PROMPT" --over-sampling-batch-size "$OVER_SAMPLING_BATCH_SIZE"
        --dynamic-sampling-filter-path "$DYNAMIC_FILTER"
        --rollout-max-response-len "$MAX_TOKENS_PER_TURN" --rollout-max-context-len "$ROLLOUT_MAX_CONTEXT_LEN"
        --rollout-temperature 1 --global-batch-size "$GLOBAL_BATCH_SIZE" --balance-data)
    local -a eval=(--eval-interval "$EVAL_INTERVAL" --eval-config "$EVAL_CONFIG"
        --n-samples-per-eval-prompt "$N_SAMPLES_PER_EVAL_PROMPT" --eval-max-response-len "$MAX_TOKENS_PER_TURN")
    local -a perf=(--tensor-model-parallel-size "$TP_SIZE" --sequence-parallel --pipeline-model-parallel-size 1
        --context-parallel-size "$CP_SIZE" --expert-model-parallel-size 1 --expert-tensor-parallel-size 1
        --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
        --use-dynamic-batch-size --max-tokens-per-gpu "$MAX_TOKENS_PER_GPU")
    local -a grpo=(--advantage-estimator grpo --use-kl-loss --kl-loss-coef 0.00 --kl-loss-type low_var_kl
        --entropy-coef 0.00 --eps-clip 0.2 --eps-clip-high 0.28)
    local -a optimizer=(--optimizer adam --lr "$LR" --lr-decay-style constant --weight-decay 0.1
        --adam-beta1 0.9 --adam-beta2 0.98)
    local -a sglang=(--rollout-num-gpus-per-engine "$ROLLOUT_GPUS_PER_ENGINE"
        --sglang-mem-fraction-static "$SGLANG_MEM_FRACTION")
    [[ -z $ROUTER_POLICY ]] || sglang+=(--router-policy "$ROUTER_POLICY")
    local -a misc=(--attention-dropout 0.0 --hidden-dropout 0.0 --accumulate-allreduce-grads-in-fp32
        --attention-softmax-in-fp32 --attention-backend flash)
    local -a custom=(--custom-generate-function-path slime_tau_plugin.generate.generate
        --custom-config-path "$TAU_CONFIG_RUN"
        --custom-rollout-log-function-path slime_tau_plugin.metrics.log_rollout
        --custom-eval-rollout-log-function-path slime_tau_plugin.metrics.log_eval)
    local -a wandb=()
    # the key itself stays in the environment (Ray workers inherit it; wandb reads WANDB_API_KEY)
    [[ -z ${WANDB_API_KEY:-} ]] || wandb=(--use-wandb --wandb-project "$WANDB_PROJECT" --wandb-group "$WANDB_GROUP")
    TRAIN_CMD=(python3 "${SLIME_DIR:-\$SLIME_DIR}/train.py" "${cluster[@]}" "${MODEL_ARGS[@]}" "${ckpt[@]}"
        "${rollout[@]}" "${eval[@]}" "${perf[@]}" "${grpo[@]}" "${optimizer[@]}" "${sglang[@]}" "${misc[@]}"
        "${custom[@]}" "${wandb[@]}" "${TAU_EXTRA_ARGS[@]}")

    USER_SIM_CMD=("$PYTHON" -m sglang.launch_server --model-path "$USER_SIM_MODEL"
        --served-model-name "$USER_SIM_MODEL_NAME" --tp-size "$(tau_count "$USER_SIM_GPUS")"
        --host "$USER_SIM_HOST" --port "$USER_SIM_PORT" --mem-fraction-static "$USER_SIM_MEM_FRACTION"
        --tool-call-parser "$USER_SIM_TOOL_CALL_PARSER")
    local -a extra
    read -r -a extra <<<"$USER_SIM_EXTRA_ARGS"
    USER_SIM_CMD+=("${extra[@]}")

    local has_nvlink=0
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m 2>/dev/null | grep -q 'NV[0-9]'; then has_nvlink=1; fi
    RUNTIME_ENV_JSON=$("$PYTHON" -c 'import json, sys; print(json.dumps({"env_vars": dict(a.split("=", 1) for a in sys.argv[1:])}))' \
        "PYTHONPATH=$MEGATRON_DIR:$TAU_REPO_DIR" CUDA_DEVICE_MAX_CONNECTIONS=1 "NCCL_NVLS_ENABLE=$has_nvlink" \
        PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True)
    RAY_JOB_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:$RAY_DASHBOARD_PORT}
    RAY_START_CMD=(ray start --head --node-ip-address "$MASTER_ADDR" --num-gpus "$NUM_TRAIN_GPUS"
        --disable-usage-stats --dashboard-host "$RAY_DASHBOARD_HOST" --dashboard-port "$RAY_DASHBOARD_PORT")
    SUBMIT_CMD=(ray job submit --address "$RAY_JOB_ADDRESS" --submission-id "$RUN_NAME"
        --runtime-env-json "$RUNTIME_ENV_JSON" --)
}

# One shell word, quoted only when it must be (the printed commands can be pasted into a shell).
tau_q() {
    if [[ $1 =~ ^[A-Za-z0-9_./:,=@%+-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

tau_print_words() {
    local word
    for word in "$@"; do printf ' %s' "$(tau_q "$word")"; done
}

tau_print_commands() {
    if [[ ${START_USER_SIM:-0} == 1 ]]; then
        printf 'user simulator (GPUs %s, log %s):\n  CUDA_VISIBLE_DEVICES=%s' "$USER_SIM_GPUS" "$RUN_DIR/user_sim.log" "$USER_SIM_GPUS"
        tau_print_words "${USER_SIM_CMD[@]}"
        printf '\n  then poll http://%s:%s/health for up to %ss\n' "$USER_SIM_HOST" "$USER_SIM_PORT" "$USER_SIM_TIMEOUT_S"
    fi
    printf 'ray (GPUs %s):\n' "$TRAIN_GPUS"
    if [[ -n $RAY_ADDRESS ]]; then
        printf '  existing cluster %s (not started, not stopped)\n' "$RAY_ADDRESS"
    else
        printf '  CUDA_VISIBLE_DEVICES=%s' "$TRAIN_GPUS"
        tau_print_words "${RAY_START_CMD[@]}"
        printf '\n'
    fi
    printf ' '
    tau_print_words "${SUBMIT_CMD[@]}"
    printf ' <train command>\ntrain command:\n%s' "$(tau_q "${TRAIN_CMD[0]}")"
    local word
    for word in "${TRAIN_CMD[@]:1}"; do
        if [[ $word == -* || $word == \{* ]]; then printf ' \\\n   %s' "$(tau_q "$word")"; else printf ' %s' "$(tau_q "$word")"; fi
    done
    printf '\n'
}

# Kill a process group this script created (setsid), politely then firmly.
tau_stop_group() {
    local pid=$1 _
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 30); do
        kill -0 -- "-$pid" 2>/dev/null || return 0
        sleep 1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
}

tau_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ ${TAU_JOB_SUBMITTED:-0} == 1 ]]; then
        ray job stop --address "$RAY_JOB_ADDRESS" "$RUN_NAME" >/dev/null 2>&1 || true
    fi
    if [[ ${TAU_RAY_STARTED:-0} == 1 ]]; then
        tau_log "stopping the Ray head this script started"
        ray stop >/dev/null 2>&1 || true
    fi
    if [[ -n ${USER_SIM_PID:-} ]]; then
        tau_log "stopping the user-simulator server (pid $USER_SIM_PID)"
        tau_stop_group "$USER_SIM_PID"
    fi
    exit "$rc"
}

tau_http_ok() {
    if command -v curl >/dev/null 2>&1; then
        curl -sf -o /dev/null --max-time 5 "$1"
    else
        "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1" 2>/dev/null
    fi
}

tau_start_user_sim() {
    local health="http://$USER_SIM_HOST:$USER_SIM_PORT/health" log="$RUN_DIR/user_sim.log"
    ! tau_http_ok "$health" ||
        tau_die "something already answers on $health; set USER_SIM_PORT to a free port (this script talks only to a server it started)"
    local -a launcher=()
    if command -v setsid >/dev/null 2>&1; then launcher=(setsid); fi # own process group: one kill stops its workers
    tau_log "starting the user simulator on GPUs $USER_SIM_GPUS (log $log)"
    CUDA_VISIBLE_DEVICES=$USER_SIM_GPUS "${launcher[@]}" "${USER_SIM_CMD[@]}" >"$log" 2>&1 &
    USER_SIM_PID=$!
    local start=$SECONDS
    while ((SECONDS - start < USER_SIM_TIMEOUT_S)); do
        kill -0 "$USER_SIM_PID" 2>/dev/null ||
            tau_die "the user-simulator server exited before it was healthy; last log line: $(tail -n 1 "$log" 2>/dev/null) (full log $log)"
        if tau_http_ok "$health"; then
            tau_log "user simulator healthy at $health after $((SECONDS - start))s"
            return 0
        fi
        sleep 2
    done
    tau_die "the user-simulator server was not healthy at $health after ${USER_SIM_TIMEOUT_S}s (USER_SIM_TIMEOUT_S); see $log"
}

tau_start_ray() {
    if [[ -n $RAY_ADDRESS ]]; then
        tau_log "submitting to the Ray cluster at $RAY_ADDRESS (this script neither starts nor stops it)"
        return 0
    fi
    ! ray status >/dev/null 2>&1 ||
        tau_die "a Ray cluster already runs on this node; set RAY_ADDRESS=http://<head>:<dashboard port> to submit to it, or stop it first (this script only stops what it starts)"
    export MASTER_ADDR # as slime's scripts do, for the processes Ray starts
    (cd "$SLIME_DIR" && CUDA_VISIBLE_DEVICES=$TRAIN_GPUS "${RAY_START_CMD[@]}") # from slime's dir, as slime's scripts
    TAU_RAY_STARTED=1
}

tau_main() {
    TAU_EXTRA_ARGS=("$@")
    TAU_FUNCTIONS=(slime_tau_plugin.generate.generate slime_tau_plugin.metrics.log_rollout slime_tau_plugin.metrics.log_eval)
    tau_defaults
    [[ $DRY_RUN != 1 ]] || tau_log "dry run: checks and commands only; nothing is started or written"
    tau_checks
    tau_render_config
    if ((${#TAU_MISSING[@]})); then
        local item
        [[ $DRY_RUN == 1 ]] || tau_die "missing before a real run: $(printf '%s; ' "${TAU_MISSING[@]}")"
        for item in "${TAU_MISSING[@]}"; do tau_log "missing (a real run stops here): $item"; done
    fi
    tau_prepare_data
    tau_build_commands
    if [[ $DRY_RUN == 1 ]]; then
        tau_print_commands
        return 0
    fi
    command -v ray >/dev/null 2>&1 || tau_die "ray is not on PATH; run inside slime's image (slimerl/slime) or install slime's requirements"
    mkdir -p "$RUN_DIR"
    trap tau_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    tau_print_commands >"$RUN_DIR/commands.txt"
    [[ $START_USER_SIM != 1 ]] || tau_start_user_sim
    tau_start_ray
    tau_log "submitting $RUN_NAME (commands in $RUN_DIR/commands.txt)"
    TAU_JOB_SUBMITTED=1
    (cd "$SLIME_DIR" && "${SUBMIT_CMD[@]}" "${TRAIN_CMD[@]}")
}
