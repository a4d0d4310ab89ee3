# shellcheck shell=bash
# Automatic resume: a real run is supervised (MAX_RESTARTS > 0). Each attempt is the launch script again in a child
# process that starts, watches and stops its own processes; after a crash the supervisor starts the next attempt,
# which resumes from the newest checkpoint in LOAD (slime's --load). Not restarted: a clean end, a refusal before
# anything started, Ctrl-C or TERM, and the failure guard's stop (FailureGuardError in the job's output) naming an
# endpoint this launcher does not serve (a hosted user or judge, the policy, ...): a restart would not fix it. A stop
# naming the user simulator this launcher serves (its failures, or the review's share of customer errors; or a
# judge at its URL) restarts the attempt, which starts that server again and submits once it is healthy.
# The budget is MAX_RESTARTS restarts per healthy stretch: an attempt that ran RESTART_REFILL_S seconds before it
# crashed gets the whole budget back, so crashes hours apart never add up to the end of a 20-hour run, while a crash
# loop still stops after MAX_RESTARTS. Every restart is a line in $RUN_DIR/restarts.log.
# Exit statuses (the run's, and the attempts'; docs/slime-training.md lists them too):
#   0 done; 1 refused before anything started; 3 a dry run with missing pieces; 4 stopped by the failure guard on
#   an endpoint this launcher cannot restart (or 76's budget used up); 75 crashed (restarted; the run's status once
#   MAX_RESTARTS is used up, or with MAX_RESTARTS=0); 76 (an attempt's only) stopped by the guard on an endpoint this
#   launcher serves (restarted); 130/143 Ctrl-C/TERM (not restarted).
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

# Run CMD... (one attempt) until it ends without a crash, at most MAX_RESTARTS more times in a row (an attempt that
# ran RESTART_REFILL_S seconds refills the budget); returns its status.
tau_supervise() {
    local attempt=0 used=0 status child stop= began ran
    export RUN_NAME RUN_DIR TAU_SUPERVISED=1 # every attempt writes to the same run folder
    # a background child of a non-interactive shell ignores SIGINT: Ctrl-C reaches it as TERM (it cleans up the same)
    trap 'stop=130; kill -TERM "$child" 2>/dev/null' INT
    trap 'stop=143; kill -TERM "$child" 2>/dev/null' TERM
    while :; do
        began=$SECONDS
        TAU_ATTEMPT=$attempt "$@" &
        child=$!
        status=0
        while :; do # wait returns early when a trap fires: wait again until the attempt has ended
            wait "$child" && status=0 || status=$?
            kill -0 "$child" 2>/dev/null || break
        done
        ran=$((SECONDS - began))
        [[ -z $stop ]] || status=$stop
        [[ $status == "$TAU_EXIT_CRASH" || $status == "$TAU_EXIT_GUARD_RESTART" ]] || break
        local why="crashed after ${ran}s (see $RUN_DIR/train.log)"
        [[ $status != "$TAU_EXIT_GUARD_RESTART" ]] || why="was stopped by the failure guard on an endpoint this launcher serves (after ${ran}s)"
        if ((used > 0 && ${RESTART_REFILL_S:-0} > 0 && ran >= RESTART_REFILL_S)); then
            tau_log "attempt $((attempt + 1)) ran ${ran}s (RESTART_REFILL_S=$RESTART_REFILL_S): the restart budget is full again ($MAX_RESTARTS; $used used before)"
            tau_count_restart "attempt budget refilled: attempt $((attempt + 1)) ran ${ran}s >= RESTART_REFILL_S=$RESTART_REFILL_S ($used restarts before)"
            used=0
        fi
        if ((used >= MAX_RESTARTS)); then
            tau_log "attempt $((attempt + 1)) $why; MAX_RESTARTS=$MAX_RESTARTS restarts used within RESTART_REFILL_S=${RESTART_REFILL_S:-0}s of each other: the run stops"
            tau_count_restart "attempt $((attempt + 1)) $why; gave up: MAX_RESTARTS=$MAX_RESTARTS restarts used"
            # a crash stays a crash (75: an outer scheduler may resume it); the served endpoint's stop becomes a stop
            [[ $status != "$TAU_EXIT_GUARD_RESTART" ]] || status=$TAU_EXIT_GUARD
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
            tau_log "attempt $((attempt + 1)) $why; restart $((used + 1)) of $MAX_RESTARTS in ${RESTART_DELAY_S}s, resuming from the newest checkpoint in LOAD=$LOAD"
            sleep "$RESTART_DELAY_S"
        fi
        tau_count_restart "attempt restart $((used + 1)) of $MAX_RESTARTS: attempt $((attempt + 1)) $why"
        attempt=$((attempt + 1)) used=$((used + 1))
    done
    trap - INT TERM
    return "$status"
}
