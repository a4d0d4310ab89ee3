# shellcheck shell=bash
# Facts a long multi-node run depends on, checked before anything starts (issue 34 §3): this node's address is
# one of its own (host networking: a container on a bridge network has another address, which the other nodes
# cannot reach), SAVE and LOAD on storage every node sees (Megatron's ranks on every node write and read their
# shards there), the training rows built from the task sets TRAIN_SETS names, and slime's own rollout-engine fault
# tolerance where this slime has it. A dry run warns (one line each); a real run refuses (one line each).
# Sourced by tau_launch.sh, never run on its own.

# slime's --use-fault-tolerance: its rollout manager health-checks the SGLang engines and restarts dead ones.
tau_fault_tolerance() {
    [[ $USE_FAULT_TOLERANCE != 0 ]] || return 1
    local args=${SLIME_DIR:+$SLIME_DIR/slime/utils/arguments.py}
    if [[ -n $args && -f $args ]] && ! grep -q -- '"--use-fault-tolerance"' "$args"; then
        [[ $USE_FAULT_TOLERANCE != 1 ]] ||
            tau_die "USE_FAULT_TOLERANCE=1, but the slime at SLIME_DIR=$SLIME_DIR has no --use-fault-tolerance (slime/utils/arguments.py); update slime or set USE_FAULT_TOLERANCE=auto"
        tau_log "fault tolerance: this slime has no --use-fault-tolerance; a dead rollout engine ends the attempt (MAX_RESTARTS resumes it)"
        return 1
    fi
    tau_log "fault tolerance: slime's --use-fault-tolerance (rollout engines health-checked and restarted in place)"
}

# One line: a warning in a dry run, a refusal in a real run.
tau_fact() {
    if [[ $DRY_RUN == 1 ]]; then tau_log "WARNING: $*"; else tau_die "$*"; fi
}

tau_own_addrs() { # this machine's addresses, one per line (none when neither tool is there)
    if command -v hostname >/dev/null 2>&1 && hostname -I >/dev/null 2>&1; then
        hostname -I | tr ' ' '\n'
    elif command -v ip >/dev/null 2>&1; then
        ip -o addr show 2>/dev/null | awk '{print $4}' | cut -d/ -f1
    fi
}

# NUM_NODES > 1: this node's address (NODE_ADDRS / MASTER_ADDR) must be one of its own: with Docker's default
# bridge network a container has an address of its own that the other nodes do not reach.
tau_check_host_network() {
    local mine addrs
    mine=$(tau_node_addr "$NODE_RANK")
    [[ $mine != \<* && $mine != 127.* && $mine != localhost ]] || return 0
    addrs=$(tau_own_addrs | grep -v '^$' | tr '\n' ' ')
    [[ -n $addrs ]] || return 0 # nothing to compare with: said nowhere, as before
    [[ " $addrs" != *" $mine "* ]] || return 0
    local hint="check NODE_ADDRS"
    [[ ! -f /.dockerenv ]] || hint="this is a container: run it with --network host (docker run ... --network host) so Ray and the user simulator are reached at the node's address"
    tau_fact "node $NODE_RANK's address $mine (NODE_ADDRS/MASTER_ADDR) is not one of this machine's (${addrs% }); the other nodes reach Ray and the user simulator there: $hint"
}

tau_fs_type() { # the file system type of PATH's nearest existing folder
    local path=$1
    while [[ ! -e $path && $path == */* ]]; do path=${path%/*}; done
    stat -f -c %T -- "${path:-/}" 2>/dev/null || echo unknown
}

# NUM_NODES > 1: Megatron's ranks on every node save their shards to SAVE and load from LOAD: a node-local
# folder (the default under /root, in the container's own file system) splits each checkpoint over the nodes.
tau_check_shared_storage() {
    [[ $SHARED_STORAGE != 1 ]] || return 0
    local name path type
    for name in SAVE LOAD; do
        path=${!name}
        type=$(tau_fs_type "$path")
        case $type in
            ext2/ext3 | ext4 | xfs | btrfs | overlayfs | overlay | tmpfs | ramfs | zfs | f2fs)
                tau_fact "$name=$path is on $type, local to this node: with NUM_NODES=$NUM_NODES every node's training ranks write and read checkpoint shards there; put SAVE and LOAD on storage every node mounts at the same path (NFS, Lustre, ...), or SHARED_STORAGE=1 if it is shared"
                return 0
                ;;
        esac
    done
}

tau_check_multinode() {
    ((NUM_NODES > 1)) || return 0
    tau_check_host_network
    tau_check_shared_storage
}

# TRAIN_DATA exists: the task sets its rows were built from must be the ones TRAIN_SETS names (it is reused as is).
tau_check_train_data() {
    [[ -f $TRAIN_DATA ]] || return 0
    tau_py "$TAU_LIB_DIR/tau_plan.py" train-sets --train-data "$TRAIN_DATA" --train-sets "$TRAIN_SETS" || exit 1
}

# COLOCATE=0 on several nodes: slime places training on the first ACTOR_NODES x TRAIN_GPUS GPUs of the cluster in
# node-IP order (slime/ray/placement_group.py sorts the GPUs by node IP, then GPU id); echo the training ranks.
tau_training_ranks() {
    local -a addrs=()
    [[ -z $NODE_ADDRS ]] || IFS=',' read -r -a addrs <<<"$NODE_ADDRS"
    local rank
    for ((rank = 0; rank < NUM_NODES; rank++)); do
        [[ ${addrs[rank]:-} =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1 # order unknown: hostnames, unset
    done
    for ((rank = 0; rank < NUM_NODES; rank++)); do printf '%s %s\n' "${addrs[rank]}" "$rank"; done |
        sort -t. -k1,1n -k2,2n -k3,3n -k4,4n | head -n "$ACTOR_NODES" | awk '{print $2}' | tr '\n' ' '
}
