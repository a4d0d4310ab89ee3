# shellcheck shell=bash
# Automatic resume: a real run is supervised (MAX_RESTARTS > 0). Each attempt is the launch script again in a child
# process that starts, watches and stops its own processes; after a crash the supervisor starts the next attempt,
# which resumes from the newest checkpoint in LOAD (slime's --load). Not restarted: a clean end, a refusal before
# anything started, Ctrl-C or TERM, and the failure guard's stop (FailureGuardError in the job's output) naming an
# endpoint this launcher does not serve (a hosted user or judge, the policy, ...): a restart would not fix it. A stop
# naming the user simulator this launcher serves (or a judge at its URL) restarts the attempt, which starts that
# server again and submits once it is healthy. Every restart is a line in $RUN_DIR/restarts.log.
# Sourced by tau_launch.sh, never run on its own.

TAU_EXIT_CRASH=75         # an attempt that started processes and then failed: restartable (EX_TEMPFAIL)
TAU_EXIT_GUARD=4          # the failure guard stopped the job on an endpoint this launcher cannot restart
TAU_EXIT_GUARD_RESTART=76 # the failure guard stopped the job on an endpoint this launcher serves: restartable
TAU_GUARD_MARK=FailureGuardError

# The status an attempt exits with, from the status it would have had (called by tau_cleanup).
tau_exit_status() {
    local rc=$1 log=${RUN_DIR:-}/train.log verdict=
    if ((rc == 0 || rc == 130 || rc == 143)) || [[ ${TAU_RAY_STARTED:-0} != 1 && ${#TAU_PROC_PIDS[@]} -eq 0 ]]; then
        echo "$rc" # success, a signal, or nothing was started (a refusal)
        return
    fi
    # this attempt's output only (train.log keeps the earlier attempts' lines), and only when it submitted the job
    [[ ${TAU_JOB_SUBMITTED:-0} != 1 || ! -f $log ]] || verdict=$(tau_py "$TAU_LIB_DIR/tau_guard.py" "$log" --offset "${TAU_TRAIN_LOG_START:-0}" \
        --config "${TAU_CONFIG_RUN:-}" --served "$([[ ${START_USER_SIM:-0} != 1 ]] || echo "${USER_SIM_BASE_URL:-}")") || true
    if [[ -z $verdict ]]; then
        echo "$TAU_EXIT_CRASH"
        return
    fi
    local endpoint=${verdict#endpoint=}
    endpoint=${endpoint%%$'\n'*}
    if [[ $verdict == *served=1* && ${TAU_SUPERVISED:-0} == 1 ]]; then
        printf '[tau] the failure guard stopped the run on the %s endpoint (%s in %s), which this launcher serves: the attempt restarts with it (counted against MAX_RESTARTS)\n' \
            "$endpoint" "$TAU_GUARD_MARK" "$log" >&2
        echo "$TAU_EXIT_GUARD_RESTART"
        return
    fi
    printf 'error: the failure guard stopped the run (%s in %s); not restarted: fix the endpoint it names, then run the same command again (it resumes from LOAD)\n' \
        "$TAU_GUARD_MARK" "$log" >&2
    echo "$TAU_EXIT_GUARD"
}

# A worker node whose Ray join ended: the head restarts (its Ray port answers again) or the run is over.
tau_head_back() {
    local start=$SECONDS wait_s
    wait_s=$(tau_head_wait_s)
    while ((SECONDS - start < wait_s)); do
        tau_port_open "$MASTER_ADDR" "$RAY_PORT" && return 0
        sleep "$TAU_HEAD_POLL_S"
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
        [[ $status == "$TAU_EXIT_CRASH" || $status == "$TAU_EXIT_GUARD_RESTART" ]] || break
        local why="crashed (see $RUN_DIR/train.log)"
        [[ $status != "$TAU_EXIT_GUARD_RESTART" ]] || why="was stopped by the failure guard on an endpoint this launcher serves"
        if ((attempt >= MAX_RESTARTS)); then
            tau_log "attempt $((attempt + 1)) $why; MAX_RESTARTS=$MAX_RESTARTS restarts used: the run stops"
            tau_count_restart "attempt $((attempt + 1)) $why; gave up: MAX_RESTARTS=$MAX_RESTARTS restarts used"
            if [[ $status == "$TAU_EXIT_GUARD_RESTART" ]]; then status=$TAU_EXIT_GUARD; else status=1; fi
            break
        fi
        if ((NODE_RANK > 0)); then
            tau_log "node $NODE_RANK left the Ray cluster; waiting up to $(tau_head_wait_s)s for the head's Ray port $MASTER_ADDR:$RAY_PORT to rejoin"
            tau_head_back || {
                tau_log "the head did not come back; node $NODE_RANK is done"
                status=0
                break
            }
        else
            tau_log "attempt $((attempt + 1)) $why; restart $((attempt + 1)) of $MAX_RESTARTS in ${RESTART_DELAY_S}s, resuming from the newest checkpoint in LOAD=$LOAD"
            sleep "$RESTART_DELAY_S"
        fi
        tau_count_restart "attempt restart $((attempt + 1)) of $MAX_RESTARTS: attempt $((attempt + 1)) $why"
        attempt=$((attempt + 1))
    done
    trap - INT TERM
    return "$status"
}
