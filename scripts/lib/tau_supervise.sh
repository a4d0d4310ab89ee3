# shellcheck shell=bash
# Automatic resume: a real run is supervised (MAX_RESTARTS > 0). Each attempt is the launch script again in a child
# process that starts, watches and stops its own processes; after a crash the supervisor starts the next attempt,
# which resumes from the newest checkpoint in LOAD (slime's --load). Not restarted: a clean end, a refusal before
# anything started, Ctrl-C or TERM, and the failure guard's stop (FailureGuardError in the job's output: a dead
# endpoint, which a restart would not fix). Sourced by tau_launch.sh, never run on its own.

TAU_EXIT_CRASH=75 # an attempt that started processes and then failed: restartable (EX_TEMPFAIL)
TAU_EXIT_GUARD=4  # the failure guard stopped the job: not restarted
TAU_GUARD_MARK=FailureGuardError

# The status an attempt exits with, from the status it would have had (called by tau_cleanup).
tau_exit_status() {
    local rc=$1
    if ((rc == 0 || rc == 130 || rc == 143)) || [[ ${TAU_RAY_STARTED:-0} != 1 && ${#TAU_PROC_PIDS[@]} -eq 0 ]]; then
        echo "$rc" # success, a signal, or nothing was started (a refusal)
    elif [[ -f ${RUN_DIR:-}/train.log ]] && grep -q "$TAU_GUARD_MARK" "$RUN_DIR/train.log"; then
        printf 'error: the failure guard stopped the run (%s in %s); not restarted: fix the endpoint it names, then run the same command again (it resumes from LOAD)\n' \
            "$TAU_GUARD_MARK" "$RUN_DIR/train.log" >&2
        echo "$TAU_EXIT_GUARD"
    else
        echo "$TAU_EXIT_CRASH"
    fi
}

# A worker node whose Ray join ended: the head restarts (its Ray port answers again) or the run is over.
tau_head_back() {
    local start=$SECONDS wait_s=$((2 * RESTART_DELAY_S + 300))
    while ((SECONDS - start < wait_s)); do
        (exec 3<>"/dev/tcp/$MASTER_ADDR/$RAY_PORT") 2>/dev/null && return 0
        sleep 10
    done
    return 1
}

# Run CMD... (one attempt) until it ends without a crash, at most MAX_RESTARTS more times; returns its status.
tau_supervise() {
    local attempt=0 status child stop=
    export RUN_NAME RUN_DIR TAU_SUPERVISED=1 # every attempt writes to the same run folder
    # a background child of a non-interactive shell ignores SIGINT: Ctrl-C reaches it as TERM (it cleans up the same)
    trap 'stop=130; kill -TERM "$child" 2>/dev/null' INT
    trap 'stop=143; kill -TERM "$child" 2>/dev/null' TERM
    while :; do
        TAU_ATTEMPT=$attempt "$@" &
        child=$!
        status=0
        while :; do # wait returns early when a trap fires: wait again until the attempt has ended
            wait "$child" && status=0 || status=$?
            kill -0 "$child" 2>/dev/null || break
        done
        [[ -z $stop ]] || status=$stop
        [[ $status == "$TAU_EXIT_CRASH" ]] || break
        if ((attempt >= MAX_RESTARTS)); then
            tau_log "attempt $((attempt + 1)) crashed; MAX_RESTARTS=$MAX_RESTARTS restarts used: the run stops"
            status=1
            break
        fi
        if ((NODE_RANK > 0)); then
            tau_log "node $NODE_RANK left the Ray cluster; waiting for the head's Ray port $MASTER_ADDR:$RAY_PORT to rejoin"
            tau_head_back || {
                tau_log "the head did not come back; node $NODE_RANK is done"
                status=0
                break
            }
        else
            tau_log "attempt $((attempt + 1)) crashed (see $RUN_DIR/train.log); restart $((attempt + 1)) of $MAX_RESTARTS in ${RESTART_DELAY_S}s, resuming from the newest checkpoint in LOAD=$LOAD"
            sleep "$RESTART_DELAY_S"
        fi
        attempt=$((attempt + 1))
    done
    trap - INT TERM
    return "$status"
}
