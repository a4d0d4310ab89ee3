# shellcheck shell=bash
# The settings of a launch: every knob's default (tau_defaults) and the checks a dry run makes before anything
# starts: paths, the GPU split, batch and token-budget arithmetic (the episode bound against CP x MAX_TOKENS_PER_GPU).
# Sourced by tau_launch.sh, never run on its own.

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
    # SAVE_INTERVAL 5: a crash (and its automatic resume from LOAD) loses at most 5 rollout steps
    : "${SAVE:=$CKPT_ROOT/${MODEL_NAME}_slime_${TAU_BENCHMARK}}" "${LOAD:=$SAVE}" "${SAVE_INTERVAL:=5}"
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
    # slime's rollout mode: partial (--partial-rollout: each step's over-sampled episodes still running at its end
    # resume next step), default (they are thrown away), fully_async (slime's background worker keeps episodes
    # in flight across steps, with partial rollout; slime's train_async.py, which refuses --colocate).
    # Off-policy ids (docs/slime-training.md, "The recommended setting"): MASK_OFFPOLICY=1 zeroes a resumed
    # episode's earlier turns; by default they train, older than 1 weight version masked (tau_max_weight_lag,
    # configs/slime/off_policy.yaml) and reweighted by slime's TIS (USE_TIS=1: --use-tis)
    : "${ROLLOUT_MODE:=partial}" "${MASK_OFFPOLICY:=0}"
    : "${USE_TIS:=$([[ $ROLLOUT_MODE == default ]] && echo 0 || echo 1)}"
    case "$ROLLOUT_MODE" in
        default | partial) : "${COLOCATE:=1}" ;;
        fully_async) : "${COLOCATE:=0}" ;;
        *) tau_die "ROLLOUT_MODE=$ROLLOUT_MODE is unknown; expected default, partial or fully_async" ;;
    esac
    TRAIN_ENTRY=train.py
    [[ $ROLLOUT_MODE != fully_async ]] || TRAIN_ENTRY=train_async.py
    # Nodes: the same script runs on every node (torchrun style). NODE_ADDRS lists every node's address, head first
    # (it sets NUM_NODES and MASTER_ADDR); NODE_RANK=0 on the head (prepares, starts Ray's head, submits), 1..N-1
    # on the others (start their user simulator, join Ray with `ray start --address`, wait until the head stops).
    : "${NODE_ADDRS:=}" "${NODE_RANK:=0}"
    local -a addrs=()
    [[ -z $NODE_ADDRS ]] || IFS=',' read -r -a addrs <<<"$NODE_ADDRS"
    : "${NUM_NODES:=$((${#addrs[@]} > 0 ? ${#addrs[@]} : 1))}" "${MASTER_ADDR:=${addrs[0]:-127.0.0.1}}"
    : "${TRAIN_GPUS:=0,1,2,3,4,5}" "${USER_SIM_GPUS=6,7}"
    : "${TP_SIZE:=2}" "${CP_SIZE:=1}" "${MAX_TOKENS_PER_GPU:=16384}"
    : "${ROLLOUT_GPUS_PER_ENGINE:=1}" "${SGLANG_MEM_FRACTION:=0.7}" "${ROUTER_POLICY:=}"
    NUM_TRAIN_GPUS=$(tau_count "$TRAIN_GPUS")
    ACTOR_NODES=${ACTOR_NODES:-} TAU_ACTOR_GPUS_SET=${ACTOR_GPUS:-}
    if [[ $COLOCATE == 1 ]]; then
        : "${ACTOR_GPUS:=$((NUM_NODES * NUM_TRAIN_GPUS))}"
        ROLLOUT_GPUS=$ACTOR_GPUS ACTOR_NODES=$NUM_NODES
    elif ((NUM_NODES > 1)); then
        # several nodes, not colocated: whole nodes train (ACTOR_NODES, default half, at least 1), the rest roll out
        : "${ACTOR_NODES:=$((NUM_NODES / 2))}"
        [[ $ACTOR_NODES =~ ^[0-9]+$ ]] || tau_die "ACTOR_NODES=$ACTOR_NODES; expected a whole number of nodes (1 to $((NUM_NODES - 1)))"
        ACTOR_GPUS=$((ACTOR_NODES * NUM_TRAIN_GPUS))
        ROLLOUT_GPUS=$(((NUM_NODES - ACTOR_NODES) * NUM_TRAIN_GPUS))
    else
        ACTOR_NODES=1
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
    # KL loss to the reference model (low_var_kl); 0: off, and no reference model is loaded or run
    : "${KL_LOSS_COEF:=0}"
    # run safety (slime_tau_plugin): advantages normalised over the samples that did not fail, a group filter
    # that reports an all-FAILED group instead of redrawing forever, metrics over every sample (kept and dropped)
    : "${REWARD_POST_PROCESS:=slime_tau_plugin.adapters.slime.advantages.post_process_rewards}"
    : "${ALL_SAMPLES_PROCESS:=slime_tau_plugin.adapters.slime.all_samples.process_all_samples}"
    : "${DYNAMIC_FILTER:=slime_tau_plugin.adapters.slime.group_filter.keep_group}"
    # rollout-vs-training log-prob mismatch metrics (slime's --get-mismatch-metrics; one more forward pass per step)
    : "${MISMATCH_METRICS:=1}"
    : "${MISMATCH_FUNCTION:=examples.train_infer_mismatch_helper.mis.compute_mis_weights_with_cp}"
    # sampling and evaluation: temperatures are explicit; evaluation runs before step 0 and every EVAL_INTERVAL rollouts
    : "${ROLLOUT_TEMPERATURE:=1.0}" "${EVAL_TEMPERATURE:=1.0}"
    : "${EVAL_INTERVAL:=10}" "${N_SAMPLES_PER_EVAL_PROMPT:=4}"
    # slime's --save-debug-rollout-data: 0 off; N: dumps under $RUN_DIR/debug_rollout, pruned to every N-th rollout
    : "${DEBUG_ROLLOUT_EVERY:=0}"
    # the curriculum (0: off): 1 draws tasks that were always solved or never solved over their last
    # tau_curriculum_window episodes less (weight tau_curriculum_floor), through slime's --data-source-path; the
    # per-task record (SAVE/tau_task_record.json, read back on a resume) is kept either way (docs/slime-training.md)
    : "${CURRICULUM:=0}"
    # Ray and logging; NUM_NODES > 1: MASTER_ADDR is this (head) node's address that the other nodes reach
    : "${RAY_ADDRESS:=}" "${MASTER_ADDR:=127.0.0.1}" "${RAY_PORT:=6379}" "${RAY_WORKERS_TIMEOUT_S:=1800}"
    : "${RAY_DASHBOARD_HOST:=0.0.0.0}" "${RAY_DASHBOARD_PORT:=8265}"
    : "${WANDB_PROJECT:=slime-tau}" "${WANDB_GROUP:=${CONFIG_STEM}_${TAU_BENCHMARK}}" "${WANDB_RUN_ID:=}"
    # the user simulator: an SGLang OpenAI-compatible server this script starts on USER_SIM_GPUS. USER_SIM_NODES=all:
    # one per node (each node's USER_SIM_GPUS; rollouts get every server's URL, comma-separated, and balance them
    # by requests in flight); head: the head node's only. One node: at 127.0.0.1; several: at each node's address
    # (NODE_ADDRS; MASTER_ADDR for the head), bound to USER_SIM_BIND_HOST (0.0.0.0)
    : "${USER_SIM_NODES:=all}"
    local sim_host=127.0.0.1 sim_bind=
    if ((NUM_NODES > 1)); then sim_host=$MASTER_ADDR sim_bind=0.0.0.0; fi
    : "${USER_SIM_MODEL:=$CKPT_ROOT/Qwen3-30B-A3B-Instruct-2507}" "${USER_SIM_HOST:=$sim_host}"
    : "${USER_SIM_BIND_HOST:=${sim_bind:-$USER_SIM_HOST}}"
    : "${USER_SIM_PORT:=30010}" "${USER_SIM_MEM_FRACTION:=0.85}" "${USER_SIM_TOOL_CALL_PARSER:=qwen25}"
    : "${USER_SIM_EXTRA_ARGS:=}" "${USER_SIM_TIMEOUT_S:=1200}"
    # a dead or hung user simulator is restarted in place (tau_user_sim.sh): /health probed every INTERVAL s
    # (each probe waits TIMEOUT s); FAILS unanswered probes in a row = hung; at most MAX_RESTARTS restarts, the
    # first after BACKOFF s, doubling, and a server healthy for REFILL_S s gets them all back (0: never); each
    # restart waits up to USER_SIM_TIMEOUT_S for its model load (FAILS timed-out probes in a row there: hung too)
    : "${USER_SIM_MAX_RESTARTS:=3}" "${USER_SIM_RESTART_BACKOFF_S:=15}" "${USER_SIM_HEALTH_INTERVAL_S:=30}"
    : "${USER_SIM_REFILL_S:=3600}"
    : "${USER_SIM_HEALTH_TIMEOUT_S:=10}" "${USER_SIM_HEALTH_FAILS:=3}" "${USER_SIM_POLL_S:=2}"
    : "${USER_SIM_MODEL_NAME:=$(basename -- "$USER_SIM_MODEL")}"
    # the user-simulator URL of each node that runs one (index = node rank; empty: none there)
    USER_SIM_URLS=("http://$USER_SIM_HOST:$USER_SIM_PORT/v1")
    local rank
    for ((rank = 1; rank < NUM_NODES; rank++)); do
        USER_SIM_URLS+=("")
        [[ $USER_SIM_NODES != all ]] || USER_SIM_URLS[rank]="http://${addrs[rank]:-<node $rank>}:$USER_SIM_PORT/v1"
    done
    USER_SIM_BASE_URL= # what rollouts are given: every server's URL, comma-separated
    local url
    for url in "${USER_SIM_URLS[@]}"; do [[ -z $url ]] || USER_SIM_BASE_URL+="${USER_SIM_BASE_URL:+,}$url"; done
    # restarts after a crash (not after the failure guard's stop, a refusal or Ctrl-C); each resumes from LOAD; an
    # attempt that ran RESTART_REFILL_S s before it crashed gets the MAX_RESTARTS budget back (0: never refilled)
    : "${MAX_RESTARTS:=3}" "${RESTART_DELAY_S:=60}" "${RESTART_REFILL_S:=3600}"
    # the watchdog: how often it checks the processes this script started (and prunes), in seconds
    : "${TAU_WATCH_INTERVAL_S:=5}" "${TAU_HEAD_POLL_S:=10}"
    # slime's --use-fault-tolerance (its rollout engines are health-checked and restarted): auto = when SLIME_DIR's
    # slime has the flag; 1 = required; 0 = off. SHARED_STORAGE=1: SAVE/LOAD are shared though their file system
    # type looks node-local (the multi-node check); 0 = check
    : "${USE_FAULT_TOLERANCE:=auto}" "${SHARED_STORAGE:=0}"
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
        tau_need_path "SLIME_DIR/$TRAIN_ENTRY" "$SLIME_DIR/$TRAIN_ENTRY"
        [[ $ROLLOUT_MODE != fully_async ]] ||
            tau_need_path "SLIME_DIR/slime/rollout/fully_async_rollout.py (ROLLOUT_MODE=fully_async)" \
                "$SLIME_DIR/slime/rollout/fully_async_rollout.py"
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
    # ray is listed with the rest (our function paths too: tau_render_config, in the same Python process as the
    # config), so a real run stops before it writes data/ or the run's config copy
    command -v ray >/dev/null 2>&1 ||
        TAU_MISSING+=("ray (not on PATH; run inside slime's image slimerl/slime or install slime's requirements)")
    tau_check_layout
    tau_check_multinode # host networking, shared SAVE/LOAD (tau_facts.sh)
}

# The GPU split and batch arithmetic Megatron and slime assert on, checked before any GPU is touched.
tau_check_layout() {
    tau_check_nodes
    [[ $DEBUG_ROLLOUT_EVERY =~ ^[0-9]+$ && $KEEP_CHECKPOINTS =~ ^[0-9]+$ ]] ||
        tau_die "DEBUG_ROLLOUT_EVERY=$DEBUG_ROLLOUT_EVERY and KEEP_CHECKPOINTS=$KEEP_CHECKPOINTS must be whole numbers (0: off / keep all)"
    [[ $MASK_OFFPOLICY == 0 || $MASK_OFFPOLICY == 1 ]] || tau_die "MASK_OFFPOLICY=$MASK_OFFPOLICY; expected 1 or 0"
    [[ $CURRICULUM == 0 || $CURRICULUM == 1 ]] || tau_die "CURRICULUM=$CURRICULUM; expected 0 (off) or 1"
    [[ $CURRICULUM == 0 || $ROLLOUT_MODE != fully_async ]] ||
        tau_die "CURRICULUM=1 needs the per-task record, which slime's fully-async rollout never feeds (it calls no all-samples hook): use ROLLOUT_MODE=partial or default"
    [[ $USE_TIS == 0 || $USE_TIS == 1 ]] || tau_die "USE_TIS=$USE_TIS; expected 1 or 0"
    [[ $USE_FAULT_TOLERANCE == auto || $USE_FAULT_TOLERANCE == 0 || $USE_FAULT_TOLERANCE == 1 ]] ||
        tau_die "USE_FAULT_TOLERANCE=$USE_FAULT_TOLERANCE; expected auto, 1 or 0"
    [[ $KL_LOSS_COEF =~ ^[0-9]*\.?[0-9]+$ ]] || tau_die "KL_LOSS_COEF=$KL_LOSS_COEF; expected a number >= 0 (0: no KL loss, no reference model)"
    [[ $ROLLOUT_MODE != fully_async || $COLOCATE != 1 ]] ||
        tau_die "ROLLOUT_MODE=fully_async runs slime's train_async.py, which refuses --colocate: set COLOCATE=0 (rollout engines on GPUs of their own) or use ROLLOUT_MODE=partial"
    local model_parallel=$((TP_SIZE * CP_SIZE))
    if [[ $COLOCATE != 1 ]] && ((NUM_NODES > 1)); then
        ((ACTOR_NODES >= 1 && ACTOR_NODES < NUM_NODES)) ||
            tau_die "ACTOR_NODES=$ACTOR_NODES with COLOCATE=0 on NUM_NODES=$NUM_NODES: whole nodes train and the others roll out; expected 1 to $((NUM_NODES - 1))"
        [[ -z $TAU_ACTOR_GPUS_SET || $TAU_ACTOR_GPUS_SET == "$ACTOR_GPUS" ]] ||
            tau_die "ACTOR_GPUS=$TAU_ACTOR_GPUS_SET with COLOCATE=0 on NUM_NODES=$NUM_NODES: whole nodes train; set ACTOR_NODES (now $ACTOR_NODES node(s) x $NUM_TRAIN_GPUS GPUs = $ACTOR_GPUS) instead"
    elif [[ $COLOCATE != 1 ]] && ((ACTOR_GPUS < 1 || ROLLOUT_GPUS < 1)); then
        tau_die "COLOCATE=0 splits TRAIN_GPUS=$TRAIN_GPUS into ACTOR_GPUS=$ACTOR_GPUS for training (a multiple of TP_SIZE*CP_SIZE=$model_parallel) and $ROLLOUT_GPUS for rollout engines; both must be >= 1: add GPUs to TRAIN_GPUS, set ACTOR_GPUS, or lower TP_SIZE"
    fi
    if ((ACTOR_GPUS % model_parallel != 0)); then
        # with COLOCATE=1 the training GPUs are TRAIN_GPUS' count: name the variable the user set
        [[ $COLOCATE == 1 ]] &&
            tau_die "TRAIN_GPUS=$TRAIN_GPUS gives $ACTOR_GPUS training GPUs, not a multiple of TP_SIZE*CP_SIZE=$model_parallel: list a multiple of $model_parallel GPUs or change TP_SIZE"
        tau_die "ACTOR_GPUS=$ACTOR_GPUS is not a multiple of TP_SIZE*CP_SIZE=$model_parallel"
    fi
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

# Flags given to the run script (appended to train.py's command) that this plugin cannot serve, or that the
# script's own settings own: refused before anything starts, naming the setting to use instead.
tau_check_extra_args() {
    local i word next
    for ((i = 0; i < ${#TAU_EXTRA_ARGS[@]}; i++)); do
        word=${TAU_EXTRA_ARGS[i]} next=${TAU_EXTRA_ARGS[i + 1]:-}
        case $word in
            --apply-chat-template)
                tau_die "$word: the prompt is a task index and slime_tau_plugin builds the chat itself; drop the flag" ;;
            --input-key | --metadata-key | --custom-generate-function-path)
                local want=index
                [[ $word != --metadata-key ]] || want=metadata
                [[ $word != --custom-generate-function-path ]] || want=slime_tau_plugin.generate.generate
                [[ $next == "$want" ]] || tau_die "$word $next: τ rows need $word $want (slime-tau prepare writes them so)" ;;
            --use-kl-loss | --kl-loss-coef | --kl-loss-type)
                tau_die "$word: set KL_LOSS_COEF instead (0: no KL loss and no reference model; > 0: low_var_kl against REF_LOAD)" ;;
            --partial-rollout | --rollout-function-path | --colocate)
                tau_die "$word: set ROLLOUT_MODE (default, partial, fully_async) and COLOCATE instead; the script adds the flags each mode needs" ;;
            --actor-num-nodes | --actor-num-gpus-per-node | --rollout-num-gpus | --num-gpus-per-node)
                tau_die "$word: set NUM_NODES (or NODE_ADDRS), TRAIN_GPUS and ACTOR_GPUS instead; the plan derives slime's GPU flags from them" ;;
        esac
    done
}
