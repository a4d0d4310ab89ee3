# shellcheck shell=bash
# The cluster side of a launch: which node does what (the plan and the commands every dry run prints), the user
# simulators (one per node with USER_SIM_NODES=all), Ray's head on NODE_RANK=0 and `ray start --address ... --block`
# on the others.
# The same script runs on every node with the same settings; only NODE_RANK differs. Sourced by tau_launch.sh.

tau_check_nodes() {
    [[ $NUM_NODES =~ ^[1-9][0-9]*$ ]] || tau_die "NUM_NODES=$NUM_NODES; expected a whole number >= 1"
    [[ $NODE_RANK =~ ^[0-9]+$ ]] && ((NODE_RANK < NUM_NODES)) ||
        tau_die "NODE_RANK=$NODE_RANK; expected 0 (the head) to $((NUM_NODES - 1)) (NUM_NODES=$NUM_NODES)"
    [[ $USER_SIM_NODES == all || $USER_SIM_NODES == head ]] ||
        tau_die "USER_SIM_NODES=$USER_SIM_NODES; expected all (a user simulator on every node) or head (one, on the head)"
    [[ $MAX_RESTARTS =~ ^[0-9]+$ && $RESTART_DELAY_S =~ ^[0-9]+$ ]] ||
        tau_die "MAX_RESTARTS=$MAX_RESTARTS and RESTART_DELAY_S=$RESTART_DELAY_S must be whole numbers (0: no restart / at once)"
    local knob
    for knob in RESTART_REFILL_S USER_SIM_REFILL_S USER_SIM_MAX_RESTARTS USER_SIM_RESTART_BACKOFF_S USER_SIM_HEALTH_INTERVAL_S USER_SIM_HEALTH_TIMEOUT_S USER_SIM_HEALTH_FAILS SAVE_INTERVAL; do
        [[ ${!knob} =~ ^[0-9]+$ ]] || tau_die "$knob=${!knob}; expected a whole number"
    done
    ((USER_SIM_HEALTH_FAILS >= 1 && USER_SIM_HEALTH_TIMEOUT_S >= 1 && SAVE_INTERVAL >= 1)) ||
        tau_die "USER_SIM_HEALTH_FAILS, USER_SIM_HEALTH_TIMEOUT_S and SAVE_INTERVAL must be at least 1"
    if [[ -n $NODE_ADDRS ]] && (($(tau_count "$NODE_ADDRS") != NUM_NODES)); then
        tau_die "NODE_ADDRS=$NODE_ADDRS lists $(tau_count "$NODE_ADDRS") addresses, NUM_NODES=$NUM_NODES; list every node's address, head first"
    fi
    local twice # one address twice: said here, not later as a duplicate user-simulator URL in the config
    twice=$(tr ',' '\n' <<<"$NODE_ADDRS" | sort | uniq -d | head -n 1)
    [[ -z $twice ]] || tau_die "NODE_ADDRS=$NODE_ADDRS lists $twice twice; list each node's address once, head first"
    ((NUM_NODES > 1)) || return 0
    [[ -n $RAY_ADDRESS || ($MASTER_ADDR != 127.0.0.1 && $MASTER_ADDR != localhost) ]] ||
        tau_die "NUM_NODES=$NUM_NODES needs the head node's address that the other nodes reach: NODE_ADDRS=<head>,<node 1>,... (or MASTER_ADDR; now $MASTER_ADDR)"
}

# Before the config is filled: user simulators on every node need every node's address.
tau_check_user_sim_nodes() {
    ((NUM_NODES > 1)) && [[ $USER_SIM_NODES == all && -z $NODE_ADDRS ]] || return 0
    ! grep -qF '${USER_SIM_BASE_URL}' "$TAU_CONFIG" ||
        tau_die "USER_SIM_NODES=all on NUM_NODES=$NUM_NODES starts a user simulator on every node and needs their addresses: set NODE_ADDRS=<head>,<node 1>,... (head first), or USER_SIM_NODES=head (one server, on the head)"
}

tau_node_addr() { # the address of node $1 (rank), as far as the settings say
    local -a addrs=()
    [[ -z $NODE_ADDRS ]] || IFS=',' read -r -a addrs <<<"$NODE_ADDRS"
    if [[ -n ${addrs[$1]:-} ]]; then echo "${addrs[$1]}"; elif (($1 == 0)); then echo "$MASTER_ADDR"; else echo "<node $1>"; fi
}

# This node serves a user simulator: the config asks for the local server, and it is the head or USER_SIM_NODES=all.
tau_serves_user_sim() { [[ ${START_USER_SIM:-0} == 1 && -n ${USER_SIM_URLS[$1]:-} ]]; }

# Which GPUs do what on which node, the parallel layout, and where rollouts find the user simulators.
tau_print_plan() {
    local rank model_parallel=$((TP_SIZE * CP_SIZE)) train sim
    printf 'plan: %s node(s) x %s GPUs named; head: node 0 at %s (Ray %s:%s); this is node %s\n' "$NUM_NODES" \
        "$(($(tau_count "$TRAIN_GPUS") + $(tau_count "${USER_SIM_GPUS:-}")))" "$MASTER_ADDR" "$MASTER_ADDR" "$RAY_PORT" "$NODE_RANK"
    local split=0 ranks=
    if [[ $COLOCATE == 1 ]]; then
        train="train (Megatron) and roll out (SGLang engines, colocated: offloaded while training)"
    elif ((NUM_NODES == 1)); then
        train="$ACTOR_GPUS of them train (Megatron), $ROLLOUT_GPUS roll out (SGLang engines)"
    else # whole nodes train, the others roll out; slime picks them in node-IP order
        split=1
        ranks=$(tau_training_ranks) || ranks=
        train="train (Megatron) on $ACTOR_NODES of the $NUM_NODES nodes, roll out (SGLang engines) on the others: slime gives training the nodes with the lowest IP addresses (NODE_ADDRS as IPs prints which)"
    fi
    for ((rank = 0; rank < NUM_NODES; rank++)); do
        if ((split)) && [[ -n $ranks ]]; then
            train="roll out (SGLang engines$([[ $ROLLOUT_MODE != fully_async ]] || echo "; fully async: they keep generating while training runs"))"
            [[ " $ranks" != *" $rank "* ]] || train="train (Megatron; slime gives training the lowest node IPs)"
        fi
        if [[ -z $USER_SIM_GPUS ]]; then
            sim=
        elif tau_serves_user_sim "$rank"; then
            sim=" | GPUs $USER_SIM_GPUS: user simulator (SGLang, TP $(tau_count "$USER_SIM_GPUS")) at ${USER_SIM_URLS[$rank]}"
        elif [[ ${START_USER_SIM:-0} == 1 ]]; then
            sim=" | GPUs $USER_SIM_GPUS: idle (USER_SIM_NODES=head)"
        else
            sim=" | GPUs $USER_SIM_GPUS: idle (the config's user needs no server here)"
        fi
        printf '  node %s (%s%s): GPUs %s: %s%s\n' "$rank" "$(tau_node_addr "$rank")" "$( ((rank)) || echo ", head")" \
            "$TRAIN_GPUS" "$train" "$sim"
    done
    # ACTOR_GPUS and ROLLOUT_GPUS count the whole cluster
    printf '  training: %s GPUs on %s node(s) = TP %s x CP %s x data-parallel %s; rollout: %s SGLang engine(s) of %s GPU(s) behind slime'"'"'s router\n' \
        "$ACTOR_GPUS" "$ACTOR_NODES" "$TP_SIZE" "$CP_SIZE" "$((ACTOR_GPUS / model_parallel))" \
        "$((ROLLOUT_GPUS / ROLLOUT_GPUS_PER_ENGINE))" "$ROLLOUT_GPUS_PER_ENGINE"
    if [[ ${START_USER_SIM:-0} == 1 ]]; then
        printf '  user simulators: %s; rollouts get tau_user_base_url=%s (several: balanced by requests in flight)\n' \
            "$(tau_count "$USER_SIM_BASE_URL")" "$USER_SIM_BASE_URL"
    fi
}

# The command each other node runs, exactly (the same script and settings, its own NODE_RANK).
tau_print_node_commands() { # [RANK]: that node's only
    local rank last=$((${1:-NUM_NODES - 1}))
    for ((rank = ${1:-1}; rank <= last; rank++)); do
        printf '  on node %s: NODE_RANK=%s' "$rank" "$rank"
        [[ -n $NODE_ADDRS ]] || printf ' MASTER_ADDR=%s NUM_NODES=%s' "$(tau_q "$MASTER_ADDR")" "$NUM_NODES"
        [[ -z $NODE_ADDRS ]] || printf ' NODE_ADDRS=%s' "$(tau_q "$NODE_ADDRS")"
        printf ' bash %s  (with this node'"'"'s other settings); it runs:\n' "$(tau_q "$TAU_SCRIPT")"
        ! tau_serves_user_sim "$rank" ||
            printf '    the user simulator on GPUs %s (as above, --host %s); it waits up to %ss for the head'"'"'s Ray port %s:%s, joins while its simulator loads, and polls its /health for up to %ss\n' \
                "$USER_SIM_GPUS" "$USER_SIM_BIND_HOST" "$(tau_head_wait_s)" "$MASTER_ADDR" "$RAY_PORT" "$USER_SIM_TIMEOUT_S"
        printf '    CUDA_VISIBLE_DEVICES=%s' "$TRAIN_GPUS"
        tau_print_words "${RAY_JOIN_CMD[@]}"
        [[ $(tau_node_addr "$rank") == \<* ]] || tau_print_words --node-ip-address "$(tau_node_addr "$rank")"
        printf ' --block\n'
    done
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
    tau_print_plan
    if tau_serves_user_sim "$NODE_RANK"; then
        printf 'user simulator on this node (GPUs %s, log %s):\n  CUDA_VISIBLE_DEVICES=%s' "$USER_SIM_GPUS" "$RUN_DIR/user_sim.log" "$USER_SIM_GPUS"
        tau_print_words "${USER_SIM_CMD[@]}"
        printf '\n  then poll its /health for up to %ss; rollouts reach it at %s\n' "$USER_SIM_TIMEOUT_S" "${USER_SIM_URLS[$NODE_RANK]}"
    fi
    if ((NODE_RANK > 0)); then
        printf 'ray (GPUs %s): this node joins the head'"'"'s cluster:\n' "$TRAIN_GPUS"
        tau_print_node_commands "$NODE_RANK"
        return 0
    fi
    printf 'ray (GPUs %s):\n' "$TRAIN_GPUS"
    if [[ -n $RAY_ADDRESS ]]; then
        printf '  existing cluster %s (not started, not stopped)\n' "$RAY_ADDRESS"
    else
        printf '  CUDA_VISIBLE_DEVICES=%s' "$TRAIN_GPUS"
        tau_print_words "${RAY_START_CMD[@]}"
        printf '\n'
        if ((NUM_NODES > 1)); then
            tau_print_node_commands
            printf '  then wait up to %ss for %s GPUs in the cluster and every user simulator'"'"'s /health\n' \
                "$RAY_WORKERS_TIMEOUT_S" "$((NUM_NODES * NUM_TRAIN_GPUS))"
        fi
    fi
    printf ' '
    tau_print_words "${SUBMIT_CMD[@]}"
    printf ' <train command>  (output also in %s)\ntrain command:\n%s' "$RUN_DIR/train.log" "$(tau_q "${TRAIN_CMD[0]}")"
    local word
    for word in "${TRAIN_CMD[@]:1}"; do
        if [[ $word == -* || $word == \{* ]]; then printf ' \\\n   %s' "$(tau_q "$word")"; else printf ' %s' "$(tau_q "$word")"; fi
    done
    printf '\n'
}

tau_cluster_gpus() {
    "$PYTHON" -c 'import ray; ray.init(address="auto", logging_level="ERROR"); print(int(ray.cluster_resources().get("GPU", 0)))' 2>/dev/null || echo 0
}

# Ray's head comes up first (seconds), so the other nodes can join while the user simulators load their models.
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
}

# The head, with its own user simulator healthy: every other node in Ray's cluster and its simulator healthy.
tau_wait_cluster() {
    [[ -z $RAY_ADDRESS ]] && ((NUM_NODES > 1)) || return 0
    local want=$((NUM_NODES * NUM_TRAIN_GPUS)) start=$SECONDS have
    tau_log "waiting up to ${RAY_WORKERS_TIMEOUT_S}s for $((NUM_NODES - 1)) more nodes ($want GPUs); on each run the same script with its NODE_RANK (commands.txt)"
    while have=$(tau_cluster_gpus) && ((have < want)); do
        ((SECONDS - start < RAY_WORKERS_TIMEOUT_S)) ||
            tau_die "the Ray cluster has $have of $want GPUs after ${RAY_WORKERS_TIMEOUT_S}s (RAY_WORKERS_TIMEOUT_S); start the other nodes with NODE_RANK=1..$((NUM_NODES - 1)) (see $RUN_DIR/commands.txt)"
        tau_check_procs "while waiting for the other nodes"
        sleep 10
    done
    tau_log "Ray cluster: $have GPUs on $NUM_NODES nodes"
    tau_wait_user_sims
}

# A TCP port answers within 5 s (the head's Ray port, from another node).
tau_port_open() { timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null; }

# How long a worker node waits for the head's Ray port: at least as long as the head may take to load its user
# simulator (USER_SIM_TIMEOUT_S), plus a restart's delay and slack (the head starts Ray first; this is the bound).
tau_head_wait_s() { echo $((USER_SIM_TIMEOUT_S + 2 * RESTART_DELAY_S + 300)); }

tau_wait_head() {
    local start=$SECONDS wait_s
    wait_s=$(tau_head_wait_s)
    until tau_port_open "$MASTER_ADDR" "$RAY_PORT"; do
        ((SECONDS - start < wait_s)) || return 1
        tau_check_procs "while waiting for the head's Ray port"
        sleep "$TAU_HEAD_POLL_S"
    done
}

# What every node does before it starts anything: refuse a stale run, make the run folder, stop what it starts on
# exit (Ctrl-C: 130, TERM: 143), and record itself as the launcher.
tau_begin_node() {
    tau_check_stale
    mkdir -p "$RUN_DIR"
    trap tau_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    tau_record_pid launcher "$$"
}

# NODE_RANK > 0: serve this node's user simulator and lend its TRAIN_GPUS to the head's Ray cluster until it stops.
tau_worker_main() {
    tau_begin_node
    ! tau_serves_user_sim "$NODE_RANK" || tau_start_user_sim --no-wait # it loads while this node joins
    tau_log "node $NODE_RANK waits up to $(tau_head_wait_s)s for the head's Ray port $MASTER_ADDR:$RAY_PORT"
    tau_wait_head || tau_die "the head's Ray port $MASTER_ADDR:$RAY_PORT did not answer within $(tau_head_wait_s)s (USER_SIM_TIMEOUT_S + 2 x RESTART_DELAY_S + 300); start the head (NODE_RANK=0) first, or check that this node reaches it"
    local -a join=("${RAY_JOIN_CMD[@]}")
    [[ $(tau_node_addr "$NODE_RANK") == \<* ]] || join+=(--node-ip-address "$(tau_node_addr "$NODE_RANK")")
    tau_log "node $NODE_RANK joins the Ray cluster at $MASTER_ADDR:$RAY_PORT with GPUs $TRAIN_GPUS; it runs until the head stops"
    TAU_RAY_STARTED=1 TAU_JOB_SUBMITTED=0
    tau_start_main bash -c 'cd "$1" && shift && exec "$@"' _ "$SLIME_DIR" env "CUDA_VISIBLE_DEVICES=$TRAIN_GPUS" "${join[@]}" --block
    ! tau_serves_user_sim "$NODE_RANK" || tau_user_sim_ready
    tau_watch "$TAU_SUBMIT_PID"
}
