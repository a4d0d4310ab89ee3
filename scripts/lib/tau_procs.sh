# shellcheck shell=bash
# The processes a launch script starts (user simulator, Ray head, the job): start each in its own process group,
# record its PID (with its start time, so a reused PID is not mistaken for it), watch it, stop only what this
# script started, name or clean what a crashed run left behind; and the retention of checkpoints and debug
# rollout dumps, done while the job runs. Sourced by tau_launch.sh, never run on its own.

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
    "${launcher[@]}" "$@" >>"$log" 2>&1 & # appended: a restarted run keeps the earlier attempts' lines
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

# The watchdog's check: every process tau_start_process started must still run. Usage: tau_check_procs [WHEN] [SKIP]
# SKIP: the index of a process restarted in place (the user simulator): its death is the next probe's to handle,
# however it falls between that probe and this check.
tau_check_procs() {
    local i
    for i in "${!TAU_PROC_PIDS[@]}"; do
        [[ -n ${2:-} && $i == "$2" ]] && continue
        tau_alive "${TAU_PROC_PIDS[$i]}" ||
            tau_die_with_log "${TAU_PROC_NAMES[$i]}" "${TAU_PROC_PIDS[$i]}" "${TAU_PROC_LOGS[$i]}" "${1:-while the run was going}"
    done
}

# Wait for MAIN_PID (the job submission) while checking the started processes and pruning; returns its status.
tau_watch() {
    local main=$1 status=0 last_prune=$SECONDS
    while tau_alive "$main"; do
        tau_probe_user_sim "$main" # a dead or hung user simulator is restarted in place (tau_user_sim.sh)
        tau_check_procs "" "${TAU_USER_SIM_INDEX:-}"
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
    for _ in $(seq 1 "${TAU_STOP_WAIT_S:-30}"); do
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
        ray job stop --address "$RAY_JOB_ADDRESS" "$TAU_SUBMISSION_ID" >/dev/null 2>&1 || true
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
    exit "$(tau_exit_status "$rc")"
}
