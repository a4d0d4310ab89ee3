# shellcheck shell=bash
# Shared logic of the slime τ RL launch scripts (scripts/run_*_tau2.sh). Sourced, never run on its own.
#
# A run script sources this file, presets its model's defaults (each overridable) and calls `tau_main "$@"`:
#   MODEL_NAME    HF directory name; the default checkpoint paths derive from it (/root/<MODEL_NAME>...)
#   MODEL_SCRIPT  slime's Megatron architecture file $SLIME_DIR/scripts/models/<MODEL_SCRIPT> (defines MODEL_ARGS;
#                 checked against HF_CKPT/config.json when both are there)
#   CONFIG_STEM   our τ settings are configs/<CONFIG_STEM>_<TAU_BENCHMARK>.yaml (TAU_CONFIG overrides)
# Every other knob is a variable with a default (tau_settings.sh); the environment wins, then the run script's preset.
# Arguments given to the run script are appended to slime's train.py command (argparse: the last one wins); flags
# the plugin cannot serve, or that a setting owns, are refused (tau_check_extra_args).
#
# tau_main, in order: defaults -> (a real run: supervised, tau_supervise.sh: each attempt is this script again,
# restarted after a crash) -> checks (paths, nodes, GPU split, batch and token-budget arithmetic, our function
# paths) -> τ config (placeholders filled, loaded into TauConfig; a hosted user endpoint is pre-flighted) -> a real
# run stops here if anything is missing -> on every node: task data (slime-tau prepare, when missing: slime may
# place its rollout manager on any node) -> on the head (NODE_RANK=0): the eval YAML, the context budget and eval
# cost in time (tau_plan.py), resume state -> the commands -> with DRY_RUN=1: print the plan and the commands,
# exit 0 (3 when pieces are missing) -> otherwise: refuse (or, CLEAN_STALE=1, stop)
# what a crashed earlier run left behind; the head starts Ray's head, then its user simulator, waits for the other
# nodes, their user simulators and its own, submits slime's train.py and watches it (a user simulator that dies or
# hangs is restarted in place, tau_user_sim.sh; old checkpoints and debug dumps are pruned); another node starts
# its user simulator and joins the head's Ray cluster until it stops (tau_nodes.sh). Multi-node facts (host
# networking, shared SAVE/LOAD) and TRAIN_DATA's task sets are checked first (tau_facts.sh).
# On exit it stops only what it started: its Ray job, its Ray node, the server's process group. The PIDs it
# starts are recorded in $TAU_STATE_DIR/pids so that the next run can name (or clean) what a crash left.

TAU_LIB_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
TAU_REPO_DIR="$(cd -- "$TAU_LIB_DIR/../.." && pwd)"
TAU_MISSING=()
# shellcheck source=tau_procs.sh
source "$TAU_LIB_DIR/tau_procs.sh"
# shellcheck source=tau_settings.sh
source "$TAU_LIB_DIR/tau_settings.sh"
# shellcheck source=tau_nodes.sh
source "$TAU_LIB_DIR/tau_nodes.sh"
# shellcheck source=tau_supervise.sh
source "$TAU_LIB_DIR/tau_supervise.sh"
# shellcheck source=tau_user_sim.sh
source "$TAU_LIB_DIR/tau_user_sim.sh"
# shellcheck source=tau_facts.sh
source "$TAU_LIB_DIR/tau_facts.sh"

tau_log() { printf '[tau] %s\n' "$*"; }
tau_die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}
# Our own Python helpers and CLI, importable from this checkout even before `pip install -e .`.
tau_py() { PYTHONPATH="$TAU_REPO_DIR${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$@"; }
tau_count() { local IFS=','; local -a items; read -r -a items <<<"$1"; echo "${#items[@]}"; }

# Task rows, written by our own CLI when they are not there yet. The only call of `prepare`.
tau_prepare_data() {
    local -a cmd=("$PYTHON" -m slime_tau_plugin.tools.cli prepare --out "$TRAIN_DATA")
    local spec
    for spec in $TRAIN_SETS; do cmd+=(--train "$spec"); done
    for spec in $EVAL_SETS; do cmd+=(--eval "$spec"); done
    cmd+=(--eval-samples "$N_SAMPLES_PER_EVAL_PROMPT")
    tau_eval_config_check # the eval rows files EVAL_SETS needs (TAU_EVAL_MISSING)
    tau_check_train_data  # an existing file built from other task sets is refused, not reused silently
    if [[ -f $TRAIN_DATA && -z $TAU_EVAL_MISSING ]]; then
        tau_log "data: $TRAIN_DATA and the eval rows of EVAL_SETS exist (delete them to prepare again)"
    elif [[ -f $TRAIN_DATA && -z $EVAL_CONFIG ]]; then
        tau_die "EVAL_SETS=$EVAL_SETS needs rows that are not written yet ($TAU_EVAL_MISSING); write them with: $(tau_print_words "${cmd[@]}") --force"
    elif [[ $DRY_RUN == 1 ]]; then
        tau_log "data: missing; a real run first runs: ${cmd[*]}"
    else
        # another node may write the same rows meanwhile (a shared DATA_DIR): the same content, replaced atomically
        ((NODE_RANK == 0)) || cmd+=(--force)
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
    # nothing is written while anything is missing: the real run stops right after this check
    [[ $DRY_RUN == 1 || ${#TAU_MISSING[@]} -gt 0 ]] || out=(--out "$TAU_CONFIG_RUN")
    [[ $MISMATCH_METRICS != 1 ]] || out+=(--merge "$TAU_REPO_DIR/configs/slime/mismatch_metrics.yaml")
    [[ $ROLLOUT_MODE == default ]] || out+=(--merge "$TAU_REPO_DIR/configs/slime/off_policy.yaml")
    tau_check_user_sim_nodes
    local verdict before=${#TAU_MISSING[@]}
    local fn
    for fn in "${TAU_FUNCTIONS[@]}"; do out+=(--function "$fn"); done
    verdict=$(tau_py "$TAU_LIB_DIR/tau_config.py" render "$TAU_CONFIG" "${out[@]}" --preflight \
        --set "USER_SIM_BASE_URL=$USER_SIM_BASE_URL" --set "USER_SIM_MODEL_NAME=$USER_SIM_MODEL_NAME") || exit 1
    local line
    while IFS= read -r line; do
        case $line in
            missing=*) TAU_MISSING+=("${line#missing=}") ;;
            note=*) tau_log "note: ${line#note=}" ;;
        esac
    done <<<"$verdict"
    verdict=${verdict##*$'\n'}
    local valid="is valid"
    ((${#TAU_MISSING[@]} == before)) || valid="loads into TauConfig, but its run needs what is listed as missing below"
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
            tau_log "config: $TAU_CONFIG $valid; its LLM user is the server(s) this script starts ($USER_SIM_BASE_URL)"
            ;;
        user_sim=hosted) tau_log "config: $TAU_CONFIG $valid; its LLM user is a hosted endpoint, which answered GET /models (pre-flight)" ;;
        *) tau_log "config: $TAU_CONFIG $valid; it needs no LLM user server" ;;
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
        tau_log "checkpoints: none in LOAD=$LOAD; the run starts from REF_LOAD (saves to SAVE=$SAVE every $SAVE_INTERVAL rollouts: a crash loses at most $SAVE_INTERVAL steps; keeps the newest $KEEP_CHECKPOINTS; 0 = all)"
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
        [[ ! -f $HF_CKPT/config.json ]] || tau_py "$TAU_LIB_DIR/tau_plan.py" model-check --hf-config "$HF_CKPT/config.json" \
            --model-script "$MODEL_SCRIPT" -- "${MODEL_ARGS[@]}" || exit 1
    else
        MODEL_ARGS=("{MODEL_ARGS:scripts/models/$MODEL_SCRIPT}")
    fi
    local actor_per_node=$ACTOR_GPUS
    ((NUM_NODES == 1)) || actor_per_node=$NUM_TRAIN_GPUS # several nodes: whole nodes train (ACTOR_NODES of them)
    local -a cluster=(--actor-num-nodes "$ACTOR_NODES" --actor-num-gpus-per-node "$actor_per_node"
        --rollout-num-gpus "$ROLLOUT_GPUS" --num-gpus-per-node "$NUM_TRAIN_GPUS")
    [[ $COLOCATE != 1 ]] || cluster+=(--colocate)
    tau_fault_tolerance && cluster+=(--use-fault-tolerance)
    local -a ckpt=(--hf-checkpoint "$HF_CKPT" --ref-load "$REF_LOAD" --load "$LOAD" --save "$SAVE"
        --save-interval "$SAVE_INTERVAL")
    local -a rollout=(--prompt-data "$TRAIN_DATA" --input-key index --metadata-key metadata --rollout-shuffle
        --num-rollout "$NUM_ROLLOUT" --rollout-batch-size "$ROLLOUT_BATCH_SIZE"
        --n-samples-per-prompt "$N_SAMPLES_PER_PROMPT" --over-sampling-batch-size "$OVER_SAMPLING_BATCH_SIZE"
        --rollout-max-response-len "$MAX_TOKENS_PER_TURN" --rollout-max-context-len "$ROLLOUT_MAX_CONTEXT_LEN"
        --rollout-temperature "$ROLLOUT_TEMPERATURE" --global-batch-size "$GLOBAL_BATCH_SIZE" --balance-data)
    case $ROLLOUT_MODE in # the failure guard: slime's dynamic filter, or (fully async: none runs) the reward hook
        default) rollout+=(--dynamic-sampling-filter-path "$DYNAMIC_FILTER") ;;
        partial) rollout+=(--dynamic-sampling-filter-path "$DYNAMIC_FILTER" --partial-rollout) ;;
        fully_async) rollout+=(--partial-rollout
            --rollout-function-path slime.rollout.fully_async_rollout.generate_rollout_fully_async
            --eval-function-path slime.rollout.sglang_rollout.generate_rollout) ;; # slime's default eval would be the former, which refuses
    esac
    [[ $ROLLOUT_MODE == default || $MASK_OFFPOLICY != 1 ]] || rollout+=(--mask-offpolicy-in-partial-rollout)
    tau_log "rollout mode: $ROLLOUT_MODE ($TRAIN_ENTRY$([[ $ROLLOUT_MODE == default ]] || echo ", MASK_OFFPOLICY=$MASK_OFFPOLICY"), USE_TIS=$USE_TIS)"
    local -a eval=(--eval-interval "$EVAL_INTERVAL" --eval-config "$EVAL_CONFIG_RUN"
        --n-samples-per-eval-prompt "$N_SAMPLES_PER_EVAL_PROMPT" --eval-temperature "$EVAL_TEMPERATURE"
        --eval-max-response-len "$MAX_TOKENS_PER_TURN")
    local -a perf=(--tensor-model-parallel-size "$TP_SIZE" --sequence-parallel --pipeline-model-parallel-size 1
        --context-parallel-size "$CP_SIZE" --expert-model-parallel-size 1 --expert-tensor-parallel-size 1
        --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
        --use-dynamic-batch-size --max-tokens-per-gpu "$MAX_TOKENS_PER_GPU")
    # KL to the reference model: slime loads (and runs) a reference copy whenever --use-kl-loss is given, even with
    # coefficient 0 (slime/ray/placement_group.py: with_ref = kl_coef != 0 or use_kl_loss), so 0 passes neither
    local -a grpo=(--advantage-estimator grpo)
    if [[ $KL_LOSS_COEF =~ ^0*\.?0*$ ]]; then
        tau_log "KL loss: off (KL_LOSS_COEF=0): no reference model is loaded or run"
    else
        grpo+=(--use-kl-loss --kl-loss-coef "$KL_LOSS_COEF" --kl-loss-type low_var_kl)
        tau_log "KL loss: low_var_kl x $KL_LOSS_COEF against REF_LOAD (a reference model is loaded and run each step)"
    fi
    grpo+=(--entropy-coef 0.00 --eps-clip 0.2 --eps-clip-high 0.28)
    [[ $MISMATCH_METRICS != 1 ]] || grpo+=(--get-mismatch-metrics --custom-tis-function-path "$MISMATCH_FUNCTION")
    [[ $USE_TIS != 1 ]] || grpo+=(--use-tis)
    local -a optimizer=(--optimizer adam --lr "$LR" --lr-decay-style constant --weight-decay 0.1
        --adam-beta1 0.9 --adam-beta2 0.98)
    local -a sglang=(--rollout-num-gpus-per-engine "$ROLLOUT_GPUS_PER_ENGINE"
        --sglang-mem-fraction-static "$SGLANG_MEM_FRACTION")
    [[ -z $ROUTER_POLICY ]] || sglang+=(--router-policy "$ROUTER_POLICY")
    local -a misc=(--attention-dropout 0.0 --hidden-dropout 0.0 --accumulate-allreduce-grads-in-fp32
        --attention-softmax-in-fp32 --attention-backend flash)
    local -a custom=(--custom-generate-function-path slime_tau_plugin.generate.generate
        --custom-config-path "$TAU_CONFIG_RUN"
        --custom-rollout-log-function-path slime_tau_plugin.adapters.slime.metrics.log_rollout
        --custom-eval-rollout-log-function-path slime_tau_plugin.adapters.slime.metrics.log_eval
        --custom-reward-post-process-path "$REWARD_POST_PROCESS"
        --rollout-all-samples-process-path "$ALL_SAMPLES_PROCESS")
    ((DEBUG_ROLLOUT_EVERY == 0)) || custom+=(--save-debug-rollout-data "$RUN_DIR/debug_rollout/{rollout_id}.pt")
    if [[ $CURRICULUM == 1 ]]; then
        custom+=(--data-source-path slime_tau_plugin.adapters.slime.curriculum.TauCurriculumDataSource)
        tau_log "curriculum: on (tasks saturated over tau_curriculum_window episodes drawn less; record in SAVE)"
    fi
    local -a wandb=()
    # the key itself stays in the environment (Ray workers inherit it; wandb reads WANDB_API_KEY)
    [[ -z ${WANDB_API_KEY:-} ]] || wandb=(--use-wandb --wandb-project "$WANDB_PROJECT" --wandb-group "$WANDB_GROUP")
    TRAIN_CMD=(python3 "${SLIME_DIR:-\$SLIME_DIR}/$TRAIN_ENTRY" "${cluster[@]}" "${MODEL_ARGS[@]}" "${ckpt[@]}"
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
    TAU_SUBMISSION_ID=$RUN_NAME
    ((${TAU_ATTEMPT:-0} == 0)) || TAU_SUBMISSION_ID+="_restart$TAU_ATTEMPT" # Ray refuses a used submission id
    SUBMIT_CMD=(ray job submit --address "$RAY_JOB_ADDRESS" --submission-id "$TAU_SUBMISSION_ID"
        --runtime-env-json "$RUNTIME_ENV_JSON" --)
}

tau_main() {
    TAU_EXTRA_ARGS=("$@")
    TAU_SCRIPT=${TAU_SCRIPT:-$0}
    TAU_PROC_NAMES=() TAU_PROC_PIDS=() TAU_PROC_LOGS=()
    tau_defaults
    if [[ $DRY_RUN != 1 && ${TAU_SUPERVISED:-0} != 1 && $MAX_RESTARTS != 0 ]]; then
        tau_supervise bash "$TAU_SCRIPT" "$@" # every attempt is this script again, in a child process
        exit $?
    fi
    TAU_FUNCTIONS=(slime_tau_plugin.generate.generate slime_tau_plugin.adapters.slime.metrics.log_rollout slime_tau_plugin.adapters.slime.metrics.log_eval
        "$REWARD_POST_PROCESS" "$ALL_SAMPLES_PROCESS")
    [[ $DYNAMIC_FILTER == slime.* ]] || TAU_FUNCTIONS+=("$DYNAMIC_FILTER") # slime's own filters import only with slime
    [[ $DRY_RUN != 1 ]] || tau_log "dry run: checks and commands only; nothing is started or written"
    tau_checks
    tau_check_extra_args
    tau_render_config
    if ((${#TAU_MISSING[@]})); then
        local item
        [[ $DRY_RUN == 1 ]] || tau_die "missing before a real run: $(printf '%s; ' "${TAU_MISSING[@]}")"
        for item in "${TAU_MISSING[@]}"; do tau_log "missing (a real run stops here): $item"; done
    fi
    # every node writes the task rows: slime may place its rollout manager (which reads them) on any node, and
    # DATA_DIR may be node-local; the same TRAIN_SETS/EVAL_SETS give the same rows, renamed into place at once
    tau_prepare_data
    [[ $DRY_RUN == 1 ]] || tau_eval_config_check # again, after prepare wrote the rows
    [[ -z $TAU_EVAL_MISSING || $DRY_RUN == 1 ]] || tau_die "eval rows missing after prepare: $TAU_EVAL_MISSING"
    if ((NODE_RANK == 0)); then
        tau_write_eval_config
        tau_budget
        tau_resume_state
    fi # a worker node builds the commands only to print them (the eval YAML is the head's: train.py reads it)
    tau_build_commands
    if [[ $DRY_RUN == 1 ]]; then
        tau_print_commands
        ((${#TAU_MISSING[@]} == 0)) || {
            tau_log "dry run: ${#TAU_MISSING[@]} missing piece(s) listed above; a real run stops before it starts anything (exit 3)"
            exit 3
        }
        tau_log "dry run: nothing missing; the commands above are what a real run starts"
        return 0
    fi
    command -v ray >/dev/null 2>&1 || tau_die "ray is not on PATH; run inside slime's image (slimerl/slime) or install slime's requirements"
    ((NODE_RANK == 0)) || {
        tau_worker_main
        return
    }
    tau_begin_node
    tau_print_commands >"$RUN_DIR/commands.txt"
    tau_start_ray # Ray's head first: the other nodes join while the user simulators load
    ! tau_serves_user_sim 0 || tau_start_user_sim --no-wait
    tau_wait_cluster
    ! tau_serves_user_sim 0 || tau_user_sim_ready
    tau_maintain
    tau_log "submitting $TAU_SUBMISSION_ID (commands in $RUN_DIR/commands.txt, output in $RUN_DIR/train.log)"
    TAU_JOB_SUBMITTED=1
    # the job's output goes to the terminal and to train.log, where the supervisor tells the failure guard's stop apart
    TAU_TRAIN_LOG_START=$(stat -c %s -- "$RUN_DIR/train.log" 2>/dev/null || echo 0) # this attempt's lines start here
    tau_start_main bash -c 'cd "$1" && log=$2 && shift 2 && { "$@" 2>&1 | tee -a "$log"; exit "${PIPESTATUS[0]}"; }' _ \
        "$SLIME_DIR" "$RUN_DIR/train.log" "${SUBMIT_CMD[@]}" "${TRAIN_CMD[@]}"
    tau_watch "$TAU_SUBMIT_PID"
}

# The context budget and the eval cadence's cost, in numbers (scripts/lib/tau_plan.py); warnings do not stop a run.
tau_budget() {
    local out line
    out=$(tau_py "$TAU_LIB_DIR/tau_plan.py" budget --config "$TAU_CONFIG" --train-sets "$TRAIN_SETS" \
        --eval-sets "$EVAL_SETS" --context "$ROLLOUT_MAX_CONTEXT_LEN" --per-turn "$MAX_TOKENS_PER_TURN" \
        --eval-samples "$N_SAMPLES_PER_EVAL_PROMPT" --eval-interval "$EVAL_INTERVAL" --num-rollout "$NUM_ROLLOUT" \
        --rollout-batch "$ROLLOUT_BATCH_SIZE" --samples-per-prompt "$N_SAMPLES_PER_PROMPT") || exit 1
    while IFS= read -r line; do
        case $line in
            log=*) tau_log "${line#log=}" ;;
            warn=*) tau_log "WARNING: ${line#warn=}" ;;
        esac
    done <<<"$out"
}
