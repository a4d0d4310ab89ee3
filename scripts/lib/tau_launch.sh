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
# tau_main, in order: defaults -> checks (paths, GPU split, batch and token-budget arithmetic, our function
# paths) -> τ config (placeholders filled, loaded into TauConfig; a hosted user endpoint is pre-flighted: its key
# variable set, GET /models answering) -> a real run stops here if a path is missing -> task data (slime-tau
# prepare, when missing) -> the eval YAML, derived from EVAL_SETS and N_SAMPLES_PER_EVAL_PROMPT on every run ->
# resume state (checkpoint in LOAD, wandb run id) -> the commands -> with DRY_RUN=1: print them and exit 0 (no
# GPU, no slime, no Ray needed) -> otherwise: refuse (or, CLEAN_STALE=1, stop) what a crashed earlier run left
# behind, start the user-simulator SGLang server on USER_SIM_GPUS, wait for its /health, start a Ray head on
# TRAIN_GPUS (NUM_NODES > 1: wait for the other nodes to join), submit slime's train.py and watch: if a process
# the script started dies, the run stops with the last lines of its log; old checkpoints (KEEP_CHECKPOINTS) and
# debug rollout dumps (DEBUG_ROLLOUT_EVERY) are pruned as the run goes.
# On exit it stops only what it started: its Ray job, its Ray head, the server's process group. The PIDs it
# starts are recorded in $TAU_STATE_DIR/pids so that the next run can name (or clean) what a crash left.

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
    # checkpoints kept in SAVE: the newest N complete iter_* dirs (0: keep all); older ones are deleted as the run goes
    : "${KEEP_CHECKPOINTS:=3}"
    # data and run files
    : "${DATA_DIR:=$TAU_REPO_DIR/data}" "${TRAIN_DATA:=$DATA_DIR/${TAU_BENCHMARK}_train.jsonl}"
    : "${TAU_CONFIG:=$TAU_REPO_DIR/configs/${CONFIG_STEM}_${TAU_BENCHMARK}.yaml}"
    : "${RUN_NAME:=${CONFIG_STEM}_${TAU_BENCHMARK}_$(date +%Y%m%d_%H%M%S)}" "${RUN_DIR:=$TAU_REPO_DIR/runs/$RUN_NAME}"
    # EVAL_CONFIG empty: derived on every run into $RUN_DIR/eval_config.yaml; set: your own YAML, checked
    : "${EVAL_CONFIG:=}" "${TAU_STATE_DIR:=$(dirname -- "$RUN_DIR")/.launch_state}" "${CLEAN_STALE:=0}"
    # GPUs: training (+ colocated rollout engines) vs the user simulator, as CUDA device lists (per node).
    # USER_SIM_GPUS= (set and empty) means none: with a hosted or scripted user all GPUs can train.
    : "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}" "${COLOCATE:=1}" "${NUM_NODES:=1}"
    : "${TP_SIZE:=2}" "${CP_SIZE:=1}" "${MAX_TOKENS_PER_GPU:=16384}"
    : "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${SGLANG_MEM_FRACTION:=0.7}" "${ROUTER_POLICY:=}"
    NUM_TRAIN_GPUS=$(tau_count "$TRAIN_GPUS")
    if [[ $COLOCATE == 1 ]]; then
        : "${ACTOR_GPUS:=$((NUM_NODES * NUM_TRAIN_GPUS))}"
        ROLLOUT_GPUS=$ACTOR_GPUS
    else
        # half the GPUs train, rounded up to a multiple of TP_SIZE*CP_SIZE (Megatron needs whole model replicas)
        local mp=$((TP_SIZE * CP_SIZE))
        : "${ACTOR_GPUS:=$(((NUM_TRAIN_GPUS / 2 + mp - 1) / mp * mp))}"
        ROLLOUT_GPUS=$((NUM_TRAIN_GPUS - ACTOR_GPUS))
    fi
    # budgets: slime's --rollout-max-response-len is a PER-TURN cap; the context bounds the whole episode
    : "${MAX_TOKENS_PER_TURN:=1024}" "${ROLLOUT_MAX_CONTEXT_LEN:=16384}"
    # GRPO with over-sampling and DAPO's dynamic filter (groups whose rewards all agree teach nothing)
    : "${NUM_ROLLOUT:=300}" "${ROLLOUT_BATCH_SIZE:=24}" "${N_SAMPLES_PER_PROMPT:=8}"
    : "${OVER_SAMPLING_BATCH_SIZE:=$((ROLLOUT_BATCH_SIZE * 2))}"
    : "${GLOBAL_BATCH_SIZE:=$((ROLLOUT_BATCH_SIZE * N_SAMPLES_PER_PROMPT))}" "${LR:=1e-6}"
    # run safety (slime_tau_plugin): advantages normalised over the samples that did not fail, a group filter
    # that reports an all-FAILED group instead of redrawing forever, metrics over every sample (kept and dropped)
    : "${REWARD_POST_PROCESS:=slime_tau_plugin.advantages.post_process_rewards}"
    : "${ALL_SAMPLES_PROCESS:=slime_tau_plugin.all_samples.process_all_samples}"
    : "${DYNAMIC_FILTER:=slime_tau_plugin.group_filter.keep_group}"
    # rollout-vs-training log-prob mismatch metrics (slime's --get-mismatch-metrics; one more forward pass per step)
    : "${MISMATCH_METRICS:=1}"
    : "${MISMATCH_FUNCTION:=examples.train_infer_mismatch_helper.mis.compute_mis_weights_with_cp}"
    # sampling and evaluation: temperatures are explicit; evaluation runs before step 0 and every EVAL_INTERVAL rollouts
    : "${ROLLOUT_TEMPERATURE:=1.0}" "${EVAL_TEMPERATURE:=1.0}"
    : "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}"
    # slime's --save-debug-rollout-data: 0 off; N: dumps under $RUN_DIR/debug_rollout, pruned to every N-th rollout
    : "${DEBUG_ROLLOUT_EVERY:=0}"
    # Ray and logging; NUM_NODES > 1: MASTER_ADDR is this (head) node's address that the other nodes reach
    : "${RAY_ADDRESS:=}" "${MASTER_ADDR:=127.0.0.1}" "${RAY_PORT:=6379}" "${RAY_WORKERS_TIMEOUT_S:=1800}"
    : "${RAY_DASHBOARD_HOST:=0.0.0.0}" "${RAY_DASHBOARD_PORT:=8265}"
    : "${WANDB_PROJECT:=slime-tau}" "${WANDB_GROUP:=${CONFIG_STEM}_${TAU_BENCHMARK}}" "${WANDB_RUN_ID:=}"
    # the user simulator: an SGLang OpenAI-compatible server this script starts on USER_SIM_GPUS (head node).
    # USER_SIM_HOST is the address clients use; one node: 127.0.0.1; NUM_NODES > 1: MASTER_ADDR (rollouts may run
    # on any node), with the server bound to USER_SIM_BIND_HOST (0.0.0.0)
    local sim_host=127.0.0.1 sim_bind=
    if ((NUM_NODES > 1)); then sim_host=$MASTER_ADDR sim_bind=0.0.0.0; fi
    : "${USER_SIM_MODEL:=$CKPT_ROOT/Qwen3-30B-A3B-Instruct-2507}" "${USER_SIM_HOST:=$sim_host}"
    : "${USER_SIM_BIND_HOST:=${sim_bind:-$USER_SIM_HOST}}"
    : "${USER_SIM_PORT:=30010}" "${USER_SIM_MEM_FRACTION:=0.85}" "${USER_SIM_TOOL_CALL_PARSER:=qwen25}"
    : "${USER_SIM_EXTRA_ARGS:=}" "${USER_SIM_TIMEOUT_S:=1200}"
    : "${USER_SIM_MODEL_NAME:=$(basename -- "$USER_SIM_MODEL")}"
    USER_SIM_BASE_URL="http://$USER_SIM_HOST:$USER_SIM_PORT/v1"
    # the watchdog: how often it checks the processes this script started (and prunes), in seconds
    : "${TAU_WATCH_INTERVAL_S:=5}"
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
    if [[ -n $SLIME_DIR && $MISMATCH_METRICS == 1 && $MISMATCH_FUNCTION == examples.* ]]; then
        local helper=${MISMATCH_FUNCTION%.*}
        tau_need_path MISMATCH_FUNCTION "$SLIME_DIR/${helper//.//}.py"
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
    [[ $NUM_NODES =~ ^[1-9][0-9]*$ ]] || tau_die "NUM_NODES=$NUM_NODES; expected a whole number >= 1"
    [[ $DEBUG_ROLLOUT_EVERY =~ ^[0-9]+$ && $KEEP_CHECKPOINTS =~ ^[0-9]+$ ]] ||
        tau_die "DEBUG_ROLLOUT_EVERY=$DEBUG_ROLLOUT_EVERY and KEEP_CHECKPOINTS=$KEEP_CHECKPOINTS must be whole numbers (0: off / keep all)"
    if ((NUM_NODES > 1)); then
        [[ $COLOCATE == 1 ]] ||
            tau_die "COLOCATE=0 with NUM_NODES=$NUM_NODES is not supported by these scripts; use COLOCATE=1 on several nodes (or one node with COLOCATE=0)"
        [[ -n $RAY_ADDRESS || ($MASTER_ADDR != 127.0.0.1 && $MASTER_ADDR != localhost) ]] ||
            tau_die "NUM_NODES=$NUM_NODES needs MASTER_ADDR set to this head node's address that the other nodes reach (now $MASTER_ADDR)"
    fi
    local model_parallel=$((TP_SIZE * CP_SIZE))
    if [[ $COLOCATE != 1 ]] && ((ACTOR_GPUS < 1 || ROLLOUT_GPUS < 1)); then
        tau_die "COLOCATE=0 splits TRAIN_GPUS=$TRAIN_GPUS into ACTOR_GPUS=$ACTOR_GPUS for training (a multiple of TP_SIZE*CP_SIZE=$model_parallel) and $ROLLOUT_GPUS for rollout engines; both must be >= 1: add GPUs to TRAIN_GPUS, set ACTOR_GPUS, or lower TP_SIZE"
    fi
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
    # One episode is one training sample; with --use-dynamic-batch-size slime packs samples into micro-batches of
    # MAX_TOKENS_PER_GPU tokens per GPU (the sequence split over CP_SIZE GPUs). A longer episode is not cut: it is
    # trained alone in a micro-batch over that budget (up to ROLLOUT_MAX_CONTEXT_LEN / CP_SIZE tokens per GPU), the
    # memory peak the budget was meant to bound.
    ((ROLLOUT_MAX_CONTEXT_LEN <= CP_SIZE * MAX_TOKENS_PER_GPU)) ||
        tau_die "the episode bound ROLLOUT_MAX_CONTEXT_LEN=$ROLLOUT_MAX_CONTEXT_LEN exceeds CP_SIZE*MAX_TOKENS_PER_GPU=$CP_SIZE*$MAX_TOKENS_PER_GPU=$((CP_SIZE * MAX_TOKENS_PER_GPU)): slime would train such an episode alone in one micro-batch of up to $(((ROLLOUT_MAX_CONTEXT_LEN + CP_SIZE - 1) / CP_SIZE)) tokens per GPU, past the memory budget; raise MAX_TOKENS_PER_GPU or CP_SIZE, or lower ROLLOUT_MAX_CONTEXT_LEN"
}

# Task rows, written by our own CLI when they are not there yet. The only call of `prepare`.
tau_prepare_data() {
    local -a cmd=("$PYTHON" -m slime_tau_plugin.cli prepare --out "$TRAIN_DATA")
    local spec
    for spec in $TRAIN_SETS; do cmd+=(--train "$spec"); done
    for spec in $EVAL_SETS; do cmd+=(--eval "$spec"); done
    cmd+=(--eval-samples "$N_SAMPLES_PER_EVAL_PROMPT")
    tau_eval_config_check # the eval rows files EVAL_SETS needs (TAU_EVAL_MISSING)
    if [[ -f $TRAIN_DATA && -z $TAU_EVAL_MISSING ]]; then
        tau_log "data: $TRAIN_DATA and the eval rows of EVAL_SETS exist (delete them to prepare again)"
    elif [[ -f $TRAIN_DATA && -z $EVAL_CONFIG ]]; then
        tau_die "EVAL_SETS=$EVAL_SETS needs rows that are not written yet ($TAU_EVAL_MISSING); write them with: $(tau_print_words "${cmd[@]}") --force"
    elif [[ $DRY_RUN == 1 ]]; then
        tau_log "data: missing; a real run first runs: ${cmd[*]}"
    else
        tau_log "data: ${cmd[*]}"
        tau_py "${cmd[@]:1}"
    fi
}

# slime's --eval-config, derived on every run from EVAL_SETS and N_SAMPLES_PER_EVAL_PROMPT (never a stale copy);
# a YAML given as EVAL_CONFIG is used as is, after checking its sample count against N_SAMPLES_PER_EVAL_PROMPT.
tau_eval_config_check() {
    local out line
    TAU_EVAL_MISSING=
    if [[ -n $EVAL_CONFIG ]]; then
        EVAL_CONFIG_RUN=$EVAL_CONFIG
        [[ -f $EVAL_CONFIG ]] || tau_die "EVAL_CONFIG=$EVAL_CONFIG does not exist; unset it to let the script derive the eval YAML from EVAL_SETS"
        out=$(tau_py "$TAU_LIB_DIR/tau_config.py" eval-config --check "$EVAL_CONFIG" --samples "$N_SAMPLES_PER_EVAL_PROMPT") || exit 1
    else
        EVAL_CONFIG_RUN="$RUN_DIR/eval_config.yaml"
        [[ -n ${EVAL_SETS// /} ]] ||
            tau_die "EVAL_SETS is empty; name at least one eval set (e.g. tau2/retail/test): the run evaluates every EVAL_INTERVAL rollouts"
        local -a sets
        read -r -a sets <<<"$EVAL_SETS"
        out=$(tau_py "$TAU_LIB_DIR/tau_config.py" eval-config --train-data "$TRAIN_DATA" \
            --samples "$N_SAMPLES_PER_EVAL_PROMPT" "${sets[@]}") || exit 1
    fi
    TAU_EVAL_DATASETS=
    while IFS= read -r line; do
        case $line in
            datasets=*) TAU_EVAL_DATASETS=${line#datasets=} ;;
            missing=*) TAU_EVAL_MISSING+="${TAU_EVAL_MISSING:+ }${line#missing=}" ;;
        esac
    done <<<"$out"
}

tau_write_eval_config() {
    local what="eval: ${TAU_EVAL_DATASETS//,/, }; n_samples_per_eval_prompt $N_SAMPLES_PER_EVAL_PROMPT, temperature $EVAL_TEMPERATURE, before step 0 and every $EVAL_INTERVAL rollouts"
    if [[ -n $EVAL_CONFIG ]]; then
        tau_log "$what ($EVAL_CONFIG, as given)"
    elif [[ $DRY_RUN == 1 ]]; then
        tau_log "$what ($EVAL_CONFIG_RUN, derived when a real run starts)"
    else
        local -a sets
        read -r -a sets <<<"$EVAL_SETS"
        tau_py "$TAU_LIB_DIR/tau_config.py" eval-config --train-data "$TRAIN_DATA" \
            --samples "$N_SAMPLES_PER_EVAL_PROMPT" --out "$EVAL_CONFIG_RUN" "${sets[@]}" >/dev/null || exit 1
        tau_log "$what ($EVAL_CONFIG_RUN, derived now)"
    fi
}

# Fill the user-simulator placeholders, validate into TauConfig, pre-flight a hosted user endpoint, write the run
# copy (real runs only) with the keys slime's mismatch-metrics helper reads.
tau_render_config() {
    TAU_CONFIG_RUN="$RUN_DIR/tau_config.yaml"
    local -a out=()
    [[ $DRY_RUN == 1 ]] || out=(--out "$TAU_CONFIG_RUN")
    [[ $MISMATCH_METRICS != 1 ]] || out+=(--merge "$TAU_REPO_DIR/configs/slime/mismatch_metrics.yaml")
    local verdict
    verdict=$(tau_py "$TAU_LIB_DIR/tau_config.py" render "$TAU_CONFIG" "${out[@]}" --preflight \
        --set "USER_SIM_BASE_URL=$USER_SIM_BASE_URL" --set "USER_SIM_MODEL_NAME=$USER_SIM_MODEL_NAME") || exit 1
    START_USER_SIM=0
    case $verdict in
        user_sim=local)
            START_USER_SIM=1
            [[ -n $USER_SIM_GPUS ]] || tau_die "$TAU_CONFIG asks for the user-simulator server, but USER_SIM_GPUS is empty"
            local gpu
            for gpu in ${TRAIN_GPUS//,/ }; do
                [[ ,$USER_SIM_GPUS, != *",$gpu,"* ]] ||
                    tau_die "GPU $gpu is in both TRAIN_GPUS=$TRAIN_GPUS and USER_SIM_GPUS=$USER_SIM_GPUS; give each its own GPUs"
            done
            [[ $USER_SIM_MODEL != /* ]] || tau_need_path USER_SIM_MODEL "$USER_SIM_MODEL"
            tau_log "config: $TAU_CONFIG is valid; its LLM user is the server this script starts ($USER_SIM_BASE_URL)"
            ;;
        user_sim=hosted) tau_log "config: $TAU_CONFIG is valid; its LLM user is a hosted endpoint, which answered GET /models (pre-flight)" ;;
        *) tau_log "config: $TAU_CONFIG is valid; it needs no LLM user server" ;;
    esac
    if [[ $START_USER_SIM != 1 && -n $USER_SIM_GPUS ]]; then
        tau_log "no user-simulator server is started: USER_SIM_GPUS=$USER_SIM_GPUS stay idle (USER_SIM_GPUS= with those GPUs in TRAIN_GPUS trains on them)"
    fi
}

# Checkpoint and wandb state of a resumed run: LOAD holds a Megatron checkpoint -> slime resumes from it; the wandb
# run id of the run that wrote SAVE is kept next to it (${SAVE}.wandb_run_id) and reused, so a resumed run logs on.
tau_resume_state() {
    local tracker="$LOAD/latest_checkpointed_iteration.txt"
    TAU_RESUMING=0
    if [[ -f $tracker ]]; then
        TAU_RESUMING=1
        tau_log "checkpoints: $LOAD holds iteration $(tr -d '[:space:]' <"$tracker"); the run resumes from it (SAVE=$SAVE, KEEP_CHECKPOINTS=$KEEP_CHECKPOINTS)"
    else
        tau_log "checkpoints: none in LOAD=$LOAD; the run starts from REF_LOAD (saves to SAVE=$SAVE every $SAVE_INTERVAL rollouts, keeps the newest $KEEP_CHECKPOINTS; 0 = all)"
    fi
    [[ -n ${WANDB_API_KEY:-} ]] || return 0
    TAU_WANDB_ID_FILE="${SAVE%/}.wandb_run_id"
    if [[ -n $WANDB_RUN_ID ]]; then
        tau_log "wandb: run id $WANDB_RUN_ID (WANDB_RUN_ID)"
    elif [[ $TAU_RESUMING == 1 && -s $TAU_WANDB_ID_FILE ]]; then
        WANDB_RUN_ID=$(tr -d '[:space:]' <"$TAU_WANDB_ID_FILE")
        tau_log "wandb: resuming run $WANDB_RUN_ID ($TAU_WANDB_ID_FILE)"
    else
        WANDB_RUN_ID=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(4))')
        tau_log "wandb: new run $WANDB_RUN_ID (kept in $TAU_WANDB_ID_FILE for a resumed run)"
        if [[ $DRY_RUN != 1 ]]; then
            mkdir -p -- "$(dirname -- "$TAU_WANDB_ID_FILE")"
            printf '%s\n' "$WANDB_RUN_ID" >"$TAU_WANDB_ID_FILE"
        fi
    fi
}

tau_build_commands() {
    if [[ -n $SLIME_DIR && -f $SLIME_DIR/scripts/models/$MODEL_SCRIPT ]]; then
        # shellcheck disable=SC1090
        source "$SLIME_DIR/scripts/models/$MODEL_SCRIPT" # sets MODEL_ARGS, slime's own architecture flags
    else
        MODEL_ARGS=("{MODEL_ARGS:scripts/models/$MODEL_SCRIPT}")
    fi
    local actor_per_node=$ACTOR_GPUS
    ((NUM_NODES == 1)) || actor_per_node=$NUM_TRAIN_GPUS
    local -a cluster=(--actor-num-nodes "$NUM_NODES" --actor-num-gpus-per-node "$actor_per_node"
        --rollout-num-gpus "$ROLLOUT_GPUS" --num-gpus-per-node "$NUM_TRAIN_GPUS")
    [[ $COLOCATE != 1 ]] || cluster+=(--colocate)
    local -a ckpt=(--hf-checkpoint "$HF_CKPT" --ref-load "$REF_LOAD" --load "$LOAD" --save "$SAVE"
        --save-interval "$SAVE_INTERVAL")
    local -a rollout=(--prompt-data "$TRAIN_DATA" --input-key index --metadata-key metadata --rollout-shuffle
        --num-rollout "$NUM_ROLLOUT" --rollout-batch-size "$ROLLOUT_BATCH_SIZE"
        --n-samples-per-prompt "$N_SAMPLES_PER_PROMPT" --over-sampling-batch-size "$OVER_SAMPLING_BATCH_SIZE"
        --dynamic-sampling-filter-path "$DYNAMIC_FILTER"
        --rollout-max-response-len "$MAX_TOKENS_PER_TURN" --rollout-max-context-len "$ROLLOUT_MAX_CONTEXT_LEN"
        --rollout-temperature "$ROLLOUT_TEMPERATURE" --global-batch-size "$GLOBAL_BATCH_SIZE" --balance-data)
    local -a eval=(--eval-interval "$EVAL_INTERVAL" --eval-config "$EVAL_CONFIG_RUN"
        --n-samples-per-eval-prompt "$N_SAMPLES_PER_EVAL_PROMPT" --eval-temperature "$EVAL_TEMPERATURE"
        --eval-max-response-len "$MAX_TOKENS_PER_TURN")
    local -a perf=(--tensor-model-parallel-size "$TP_SIZE" --sequence-parallel --pipeline-model-parallel-size 1
        --context-parallel-size "$CP_SIZE" --expert-model-parallel-size 1 --expert-tensor-parallel-size 1
        --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
        --use-dynamic-batch-size --max-tokens-per-gpu "$MAX_TOKENS_PER_GPU")
    local -a grpo=(--advantage-estimator grpo --use-kl-loss --kl-loss-coef 0.00 --kl-loss-type low_var_kl
        --entropy-coef 0.00 --eps-clip 0.2 --eps-clip-high 0.28)
    [[ $MISMATCH_METRICS != 1 ]] || grpo+=(--get-mismatch-metrics --custom-tis-function-path "$MISMATCH_FUNCTION")
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
        --custom-eval-rollout-log-function-path slime_tau_plugin.metrics.log_eval
        --custom-reward-post-process-path "$REWARD_POST_PROCESS"
        --rollout-all-samples-process-path "$ALL_SAMPLES_PROCESS")
    ((DEBUG_ROLLOUT_EVERY == 0)) || custom+=(--save-debug-rollout-data "$RUN_DIR/debug_rollout/{rollout_id}.pt")
    local -a wandb=()
    # the key itself stays in the environment (Ray workers inherit it; wandb reads WANDB_API_KEY)
    [[ -z ${WANDB_API_KEY:-} ]] || wandb=(--use-wandb --wandb-project "$WANDB_PROJECT" --wandb-group "$WANDB_GROUP")
    TRAIN_CMD=(python3 "${SLIME_DIR:-\$SLIME_DIR}/train.py" "${cluster[@]}" "${MODEL_ARGS[@]}" "${ckpt[@]}"
        "${rollout[@]}" "${eval[@]}" "${perf[@]}" "${grpo[@]}" "${optimizer[@]}" "${sglang[@]}" "${misc[@]}"
        "${custom[@]}" "${wandb[@]}" "${TAU_EXTRA_ARGS[@]}")

    USER_SIM_CMD=("$PYTHON" -m sglang.launch_server --model-path "$USER_SIM_MODEL"
        --served-model-name "$USER_SIM_MODEL_NAME" --tp-size "$(tau_count "$USER_SIM_GPUS")"
        --host "$USER_SIM_BIND_HOST" --port "$USER_SIM_PORT" --mem-fraction-static "$USER_SIM_MEM_FRACTION"
        --tool-call-parser "$USER_SIM_TOOL_CALL_PARSER")
    local -a extra
    read -r -a extra <<<"$USER_SIM_EXTRA_ARGS"
    USER_SIM_CMD+=("${extra[@]}")

    local has_nvlink=0
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi topo -m 2>/dev/null | grep -q 'NV[0-9]'; then has_nvlink=1; fi
    # slime's checkout is on the path too: the mismatch helper lives in its examples/ package
    local -a env_vars=("PYTHONPATH=$MEGATRON_DIR:$TAU_REPO_DIR${SLIME_DIR:+:$SLIME_DIR}" CUDA_DEVICE_MAX_CONNECTIONS=1
        "NCCL_NVLS_ENABLE=$has_nvlink" PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True)
    [[ -z ${WANDB_API_KEY:-} ]] || env_vars+=("WANDB_RUN_ID=$WANDB_RUN_ID" WANDB_RESUME=allow)
    RUNTIME_ENV_JSON=$("$PYTHON" -c 'import json, sys; print(json.dumps({"env_vars": dict(a.split("=", 1) for a in sys.argv[1:])}))' \
        "${env_vars[@]}")
    RAY_JOB_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:$RAY_DASHBOARD_PORT}
    RAY_START_CMD=(ray start --head --node-ip-address "$MASTER_ADDR" --port "$RAY_PORT" --num-gpus "$NUM_TRAIN_GPUS"
        --disable-usage-stats --dashboard-host "$RAY_DASHBOARD_HOST" --dashboard-port "$RAY_DASHBOARD_PORT")
    RAY_JOIN_CMD=(ray start --address "$MASTER_ADDR:$RAY_PORT" --num-gpus "$NUM_TRAIN_GPUS" --disable-usage-stats)
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
        printf '\n  then poll http://%s:%s/health for up to %ss; rollouts reach it at %s\n' "$USER_SIM_HOST" \
            "$USER_SIM_PORT" "$USER_SIM_TIMEOUT_S" "$USER_SIM_BASE_URL"
    fi
    printf 'ray (GPUs %s):\n' "$TRAIN_GPUS"
    if [[ -n $RAY_ADDRESS ]]; then
        printf '  existing cluster %s (not started, not stopped)\n' "$RAY_ADDRESS"
    else
        printf '  CUDA_VISIBLE_DEVICES=%s' "$TRAIN_GPUS"
        tau_print_words "${RAY_START_CMD[@]}"
        printf '\n'
        if ((NUM_NODES > 1)); then
            printf '  on each of the other %s nodes: CUDA_VISIBLE_DEVICES=%s' "$((NUM_NODES - 1))" "$TRAIN_GPUS"
            tau_print_words "${RAY_JOIN_CMD[@]}"
            printf '\n  then wait up to %ss for %s GPUs in the cluster\n' "$RAY_WORKERS_TIMEOUT_S" "$((NUM_NODES * NUM_TRAIN_GPUS))"
        fi
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

# ---- processes this script starts: start, record, watch, stop ------------------------------------------------

# A process's identity: its start time (field 22 of /proc/PID/stat), so a reused PID is not mistaken for it.
tau_pid_start() { [[ -r /proc/$1/stat ]] && cut -d' ' -f22 "/proc/$1/stat" 2>/dev/null || echo -; }

tau_alive() {
    local pid=$1 start=${2:-}
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r /proc/$pid/stat ]]; then
        [[ $(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) != Z ]] || return 1 # exited, not yet reaped
        [[ -z $start || $start == - || $(tau_pid_start "$pid") == "$start" ]] || return 1
    fi
}

# Append "ROLE PID START RUN_NAME LOG" to $TAU_STATE_DIR/pids (read by the next run's tau_check_stale).
tau_record_pid() {
    mkdir -p -- "$TAU_STATE_DIR"
    printf '%s %s %s %s %s\n' "$1" "$2" "$(tau_pid_start "$2")" "${RUN_NAME:-?}" "${3:--}" >>"$TAU_STATE_DIR/pids"
}

# Start a long-lived helper NAME (e.g. "the user simulator") in its own process group, output to LOG, and put it
# under the watchdog (tau_check_procs). Sets TAU_STARTED_PID. Usage: tau_start_process NAME ROLE LOG CMD...
tau_start_process() {
    local name=$1 role=$2 log=$3
    shift 3
    local -a launcher=()
    if command -v setsid >/dev/null 2>&1; then launcher=(setsid); fi # own process group: one kill stops its workers
    mkdir -p -- "$(dirname -- "$log")"
    "${launcher[@]}" "$@" >"$log" 2>&1 &
    TAU_STARTED_PID=$!
    TAU_PROC_NAMES+=("$name")
    TAU_PROC_PIDS+=("$TAU_STARTED_PID")
    TAU_PROC_LOGS+=("$log")
    tau_record_pid "$role" "$TAU_STARTED_PID" "$log"
}

# The main command (the job submission, or verl's trainer) in the background, in its own process group so that the
# cleanup stops all of it; the watchdog (tau_watch) waits for it. Sets TAU_SUBMIT_PID. Usage: tau_start_main CMD...
tau_start_main() {
    local -a launcher=()
    if command -v setsid >/dev/null 2>&1; then launcher=(setsid); fi
    "${launcher[@]}" "$@" &
    TAU_SUBMIT_PID=$!
}

# The run stops, naming a started process that died and showing the last lines of its log.
tau_die_with_log() {
    local name=$1 pid=$2 log=$3 when=$4 status=0
    wait "$pid" 2>/dev/null || status=$?
    {
        printf 'error: %s (pid %s) exited with status %s %s; the run stops. Last %s lines of %s:\n' \
            "$name" "$pid" "$status" "$when" "${TAU_LOG_TAIL_LINES:-20}" "$log"
        tail -n "${TAU_LOG_TAIL_LINES:-20}" -- "$log" 2>/dev/null | sed 's/^/  | /'
    } >&2
    exit 1
}

# The watchdog's check: every process tau_start_process started must still run.
tau_check_procs() {
    local i
    for i in "${!TAU_PROC_PIDS[@]}"; do
        tau_alive "${TAU_PROC_PIDS[$i]}" ||
            tau_die_with_log "${TAU_PROC_NAMES[$i]}" "${TAU_PROC_PIDS[$i]}" "${TAU_PROC_LOGS[$i]}" "${1:-while the run was going}"
    done
}

# Wait for MAIN_PID (the job submission) while checking the started processes and pruning; returns its status.
tau_watch() {
    local main=$1 status=0 last_prune=$SECONDS
    while tau_alive "$main"; do
        tau_check_procs
        if ((SECONDS - last_prune >= 60)); then
            tau_maintain
            last_prune=$SECONDS
        fi
        sleep "$TAU_WATCH_INTERVAL_S"
    done
    wait "$main" || status=$?
    tau_check_procs "while the run was going (the job ended with status $status)"
    tau_maintain
    return "$status"
}

# Keep the newest KEEP complete Megatron checkpoints (iter_* up to the one latest_checkpointed_iteration.txt names);
# a newer dir may still be being written and is never touched.
tau_prune_checkpoints() {
    local dir=$1 keep=$2 latest path iter
    ((keep > 0)) && [[ -f $dir/latest_checkpointed_iteration.txt ]] || return 0
    latest=$(tr -d '[:space:]' <"$dir/latest_checkpointed_iteration.txt")
    [[ $latest =~ ^[0-9]+$ ]] || return 0
    local -a complete=()
    for path in "$dir"/iter_*; do
        iter=${path##*/iter_}
        [[ -d $path && $iter =~ ^[0-9]+$ ]] && ((10#$iter <= 10#$latest)) && complete+=("$path")
    done
    ((${#complete[@]} > keep)) || return 0
    for path in "${complete[@]:0:${#complete[@]}-keep}"; do # glob order is numeric order (zero-padded names)
        tau_log "pruning checkpoint $path (KEEP_CHECKPOINTS=$keep)"
        rm -rf -- "$path"
    done
}

# slime dumps every rollout (--save-debug-rollout-data has no interval): keep every EVERY-th and the newest.
tau_prune_debug_rollouts() {
    local dir=$1 every=$2 path id newest=-1
    ((every > 1)) && [[ -d $dir ]] || return 0
    for path in "$dir"/*.pt; do
        id=${path##*/}
        id=${id%.pt}
        [[ $id =~ ^[0-9]+$ ]] && ((id > newest)) && newest=$id
    done
    for path in "$dir"/*.pt; do
        id=${path##*/}
        id=${id%.pt}
        [[ $id =~ ^[0-9]+$ ]] && ((id != newest && id % every != 0)) && rm -f -- "$path"
    done
    return 0
}

tau_maintain() {
    tau_prune_checkpoints "$SAVE" "$KEEP_CHECKPOINTS"
    tau_prune_debug_rollouts "$RUN_DIR/debug_rollout" "$DEBUG_ROLLOUT_EVERY"
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

# What a crashed earlier run left on this node (recorded in $TAU_STATE_DIR/pids): refused with the command that
# cleans it, or cleaned with CLEAN_STALE=1. A launcher that still runs is another live launch: always refused.
tau_check_stale() {
    local file="$TAU_STATE_DIR/pids" role pid start run log
    [[ -f $file ]] || return 0
    local -a stale=()
    while read -r role pid start run log; do
        [[ -n ${pid:-} ]] || continue
        case $role in
            launcher)
                ! tau_alive "$pid" "$start" ||
                    tau_die "another launch ($run, pid $pid) is still running on this node; wait for it, or stop it with: kill $pid"
                ;;
            ray_head)
                if ray status >/dev/null 2>&1; then stale+=("ray:the Ray head started by $run:ray stop"); fi
                ;;
            *)
                if tau_alive "$pid" "$start"; then stale+=("$pid:the $role process of $run (pid $pid, log $log):kill -- -$pid"); fi
                ;;
        esac
    done <"$file"
    local item what fix
    for item in "${stale[@]}"; do
        pid=${item%%:*} what=${item#*:} fix=${what##*:} what=${what%:*}
        if [[ $CLEAN_STALE == 1 ]]; then
            tau_log "CLEAN_STALE=1: stopping $what, left by a crashed run"
            if [[ $pid == ray ]]; then ray stop >/dev/null 2>&1 || true; else tau_stop_group "$pid"; fi
        else
            tau_die "$what is still running, left by a crashed run; stop it with: $fix (or rerun with CLEAN_STALE=1)"
        fi
    done
    rm -f -- "$file"
}

tau_cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ ${TAU_JOB_SUBMITTED:-0} == 1 ]]; then
        ray job stop --address "$RAY_JOB_ADDRESS" "$RUN_NAME" >/dev/null 2>&1 || true
    fi
    if [[ -n ${TAU_SUBMIT_PID:-} ]] && tau_alive "$TAU_SUBMIT_PID"; then tau_stop_group "$TAU_SUBMIT_PID"; fi
    if [[ ${TAU_RAY_STARTED:-0} == 1 ]]; then
        tau_log "stopping the Ray head this script started"
        ray stop >/dev/null 2>&1 || true
    fi
    local pid
    for pid in "${TAU_PROC_PIDS[@]}"; do
        tau_log "stopping pid $pid's process group (started by this script)"
        tau_stop_group "$pid"
    done
    rm -f -- "$TAU_STATE_DIR/pids"
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
    tau_log "starting the user simulator on GPUs $USER_SIM_GPUS (log $log)"
    CUDA_VISIBLE_DEVICES=$USER_SIM_GPUS tau_start_process "the user-simulator server" user_sim "$log" "${USER_SIM_CMD[@]}"
    USER_SIM_PID=$TAU_STARTED_PID
    local start=$SECONDS
    while ((SECONDS - start < USER_SIM_TIMEOUT_S)); do
        tau_check_procs "before it was healthy"
        if tau_http_ok "$health"; then
            tau_log "user simulator healthy at $health after $((SECONDS - start))s"
            return 0
        fi
        sleep 2
    done
    tau_die "the user-simulator server was not healthy at $health after ${USER_SIM_TIMEOUT_S}s (USER_SIM_TIMEOUT_S); see $log"
}

tau_cluster_gpus() {
    "$PYTHON" -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(int(ray.cluster_resources().get("GPU", 0)))' 2>/dev/null || echo 0
}

tau_start_ray() {
    if [[ -n $RAY_ADDRESS ]]; then
        tau_log "submitting to the Ray cluster at $RAY_ADDRESS (this script neither starts nor stops it)"
        return 0
    fi
    ! ray status >/dev/null 2>&1 ||
        tau_die "a Ray cluster already runs on this node (not one this script recorded); set RAY_ADDRESS=http://<head>:<dashboard port> to submit to it, or stop it with: ray stop"
    export MASTER_ADDR # as slime's scripts do, for the processes Ray starts
    tau_record_pid ray_head "$$"
    (cd "$SLIME_DIR" && CUDA_VISIBLE_DEVICES=$TRAIN_GPUS "${RAY_START_CMD[@]}") # from slime's dir, as slime's scripts
    TAU_RAY_STARTED=1
    ((NUM_NODES > 1)) || return 0
    local want=$((NUM_NODES * NUM_TRAIN_GPUS)) start=$SECONDS have
    tau_log "waiting up to ${RAY_WORKERS_TIMEOUT_S}s for $((NUM_NODES - 1)) more nodes ($want GPUs); on each run: CUDA_VISIBLE_DEVICES=$TRAIN_GPUS${RAY_JOIN_CMD[*]/#/ }"
    while have=$(tau_cluster_gpus) && ((have < want)); do
        ((SECONDS - start < RAY_WORKERS_TIMEOUT_S)) ||
            tau_die "the Ray cluster has $have of $want GPUs after ${RAY_WORKERS_TIMEOUT_S}s (RAY_WORKERS_TIMEOUT_S); start the other nodes with: ${RAY_JOIN_CMD[*]}"
        sleep 10
    done
    tau_log "Ray cluster: $have GPUs on $NUM_NODES nodes"
}

tau_main() {
    TAU_EXTRA_ARGS=("$@")
    TAU_PROC_NAMES=() TAU_PROC_PIDS=() TAU_PROC_LOGS=()
    tau_defaults
    TAU_FUNCTIONS=(slime_tau_plugin.generate.generate slime_tau_plugin.metrics.log_rollout slime_tau_plugin.metrics.log_eval
        "$REWARD_POST_PROCESS" "$ALL_SAMPLES_PROCESS")
    [[ $DYNAMIC_FILTER == slime.* ]] || TAU_FUNCTIONS+=("$DYNAMIC_FILTER") # slime's own filters import only with slime
    [[ $DRY_RUN != 1 ]] || tau_log "dry run: checks and commands only; nothing is started or written"
    tau_checks
    tau_render_config
    if ((${#TAU_MISSING[@]})); then
        local item
        [[ $DRY_RUN == 1 ]] || tau_die "missing before a real run: $(printf '%s; ' "${TAU_MISSING[@]}")"
        for item in "${TAU_MISSING[@]}"; do tau_log "missing (a real run stops here): $item"; done
    fi
    tau_prepare_data
    [[ $DRY_RUN == 1 ]] || tau_eval_config_check # again, after prepare wrote the rows
    [[ -z $TAU_EVAL_MISSING || $DRY_RUN == 1 ]] || tau_die "eval rows missing after prepare: $TAU_EVAL_MISSING"
    tau_write_eval_config
    tau_resume_state
    tau_build_commands
    if [[ $DRY_RUN == 1 ]]; then
        tau_print_commands
        return 0
    fi
    command -v ray >/dev/null 2>&1 || tau_die "ray is not on PATH; run inside slime's image (slimerl/slime) or install slime's requirements"
    tau_check_stale
    mkdir -p "$RUN_DIR"
    trap tau_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    tau_record_pid launcher "$$"
    tau_print_commands >"$RUN_DIR/commands.txt"
    [[ $START_USER_SIM != 1 ]] || tau_start_user_sim
    tau_start_ray
    tau_maintain
    tau_log "submitting $RUN_NAME (commands in $RUN_DIR/commands.txt)"
    TAU_JOB_SUBMITTED=1
    tau_start_main bash -c 'cd "$1" && shift && exec "$@"' _ "$SLIME_DIR" "${SUBMIT_CMD[@]}" "${TRAIN_CMD[@]}"
    tau_watch "$TAU_SUBMIT_PID"
}
