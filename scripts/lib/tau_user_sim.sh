# shellcheck shell=bash
# The user simulator this launcher serves (SGLang on USER_SIM_GPUS): started, waited for, probed while the run
# goes, and restarted in place when it dies or hangs, so that one OOM kill does not end a 20-hour run. While it is
# down, episodes fail over to the other nodes' simulators or wait out the outage (tau_outage_tolerance_s), as they
# do for any outage. Every restart is logged with the log tail and counted in $RUN_DIR/restarts.log. The budget is
# USER_SIM_MAX_RESTARTS restarts per healthy stretch: a server that stayed healthy USER_SIM_REFILL_S seconds gets it
# back. A restarted server that dies, hangs (USER_SIM_HEALTH_FAILS timed-out probes in a row) or is not healthy
# within USER_SIM_TIMEOUT_S is restarted again while the budget lasts. When it cannot be brought back: with other
# nodes' simulators in the run (USER_SIM_NODES=all) this node degrades to them (a loud line, a line in
# restarts.log and $RUN_DIR/user_sim_down.node<rank>; its Ray node stays, the engine sends the episodes to the
# other replicas); with no other replica the attempt stops, naming it (a crash: the supervisor restarts it).
# Sourced by tau_launch.sh, never run on its own.

tau_http_ok() { # URL [TIMEOUT_S]
    local timeout=${2:-5}
    if command -v curl >/dev/null 2>&1; then
        curl -sf -o /dev/null --max-time "$timeout" "$1"
    else
        "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))' \
            "$1" "$timeout" 2>/dev/null
    fi
}

# One /health probe: 0 answered 2xx; 1 refused or answered otherwise (a server still loading); 2 the connection was
# taken but no answer came within TIMEOUT_S (a hung server). Usage: tau_http_probe URL [TIMEOUT_S]
tau_http_probe() {
    local timeout=${2:-5} rc=0
    if command -v curl >/dev/null 2>&1; then
        curl -sf -o /dev/null --max-time "$timeout" "$1" || rc=$?
        case $rc in 0) return 0 ;; 28) return 2 ;; *) return 1 ;; esac
    fi
    "$PYTHON" -c 'import socket, sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))
except (socket.timeout, TimeoutError):
    sys.exit(2)
except urllib.error.URLError as exc:
    sys.exit(2 if isinstance(exc.reason, (socket.timeout, TimeoutError)) else 1)
except Exception:
    sys.exit(1)' "$1" "$timeout" 2>/dev/null
}

tau_user_sim_health() {
    if [[ $USER_SIM_BIND_HOST == 0.0.0.0 ]]; then
        echo "http://127.0.0.1:$USER_SIM_PORT/health"
    else
        echo "http://$USER_SIM_HOST:$USER_SIM_PORT/health"
    fi
}

# One line in $RUN_DIR/restarts.log (what was restarted, when, why): the run folder's count of restarts.
tau_count_restart() {
    mkdir -p -- "$RUN_DIR"
    printf '%s node=%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${NODE_RANK:-0}" "$*" >>"$RUN_DIR/restarts.log"
}

# The same command on the same GPUs, every time; a restart takes the old server's place under the watchdog.
tau_launch_user_sim() {
    local old=${TAU_USER_SIM_INDEX:-}
    CUDA_VISIBLE_DEVICES=$USER_SIM_GPUS tau_start_process "the user-simulator server" user_sim \
        "$RUN_DIR/user_sim.log" "${USER_SIM_CMD[@]}"
    if [[ -z $old ]]; then
        TAU_USER_SIM_INDEX=$((${#TAU_PROC_PIDS[@]} - 1))
    else
        TAU_PROC_PIDS[old]=$TAU_STARTED_PID
        unset 'TAU_PROC_NAMES[-1]' 'TAU_PROC_PIDS[-1]' 'TAU_PROC_LOGS[-1]'
    fi
}

# Poll /health until it answers (0), the process dies (1), USER_SIM_TIMEOUT_S passes (2), with WATCH_PID that
# process (the job) ends (3): a restart does not outlive the job it serves, or it hangs (4): USER_SIM_HEALTH_FAILS
# probes in a row took the connection and gave no answer within USER_SIM_HEALTH_TIMEOUT_S. A loading server refuses
# the connection (SGLang opens its port once the model is loaded) or answers 503 at once: only a hung one times out,
# so a server that hangs right after its start is caught by the hang probe, not waited on for USER_SIM_TIMEOUT_S.
tau_wait_user_sim_healthy() {
    local watch=${1:-} start=$SECONDS health rc timeouts=0
    health=$(tau_user_sim_health)
    while ((SECONDS - start < USER_SIM_TIMEOUT_S)); do
        tau_alive "${TAU_PROC_PIDS[$TAU_USER_SIM_INDEX]}" || return 1
        rc=0
        tau_http_probe "$health" "$USER_SIM_HEALTH_TIMEOUT_S" || rc=$?
        if ((rc == 0)); then
            TAU_USER_SIM_HEALTHY_AFTER=$((SECONDS - start)) TAU_USER_SIM_UP_SINCE=$SECONDS
            return 0
        fi
        if ((rc == 2)); then timeouts=$((timeouts + 1)); else timeouts=0; fi
        ((timeouts < USER_SIM_HEALTH_FAILS)) || return 4
        [[ -z $watch ]] || tau_alive "$watch" || return 3
        sleep "$USER_SIM_POLL_S"
    done
    return 2
}

tau_start_user_sim() {
    local health log="$RUN_DIR/user_sim.log"
    health=$(tau_user_sim_health)
    ! tau_http_ok "$health" ||
        tau_die "something already answers on $health; set USER_SIM_PORT to a free port (this script talks only to a server it started)"
    tau_log "starting the user simulator on GPUs $USER_SIM_GPUS (log $log)"
    TAU_USER_SIM_INDEX= TAU_USER_SIM_RESTARTS=0 TAU_USER_SIM_BAD_PROBES=0 TAU_USER_SIM_LAST_PROBE=$SECONDS
    TAU_USER_SIM_UP_SINCE= # when it last became healthy (empty while it is down): the budget's healthy stretch
    tau_launch_user_sim
    [[ ${1:-} != --no-wait ]] || return 0
    tau_user_sim_ready
}

# After tau_start_user_sim --no-wait (the head starts Ray's head meanwhile): wait for the first /health.
tau_user_sim_ready() {
    local rc=0 health
    health=$(tau_user_sim_health)
    tau_wait_user_sim_healthy || rc=$?
    case $rc in
        0) tau_log "user simulator healthy at $health after ${TAU_USER_SIM_HEALTHY_AFTER}s" ;;
        1)
            tau_check_procs "before it was healthy" # stops the run with the server's log tail
            tau_die "the user-simulator server exited before it was healthy; see $RUN_DIR/user_sim.log"
            ;;
        4) tau_die "the user-simulator server hung before it was healthy: /health took the connection and did not answer within ${USER_SIM_HEALTH_TIMEOUT_S}s $USER_SIM_HEALTH_FAILS times in a row (USER_SIM_HEALTH_FAILS); see $RUN_DIR/user_sim.log" ;;
        *) tau_die "the user-simulator server was not healthy at $health after ${USER_SIM_TIMEOUT_S}s (USER_SIM_TIMEOUT_S); see $RUN_DIR/user_sim.log" ;;
    esac
}

# The watchdog's probe (tau_watch, every tick): a dead server, or USER_SIM_HEALTH_FAILS probes in a row that got
# no answer within USER_SIM_HEALTH_TIMEOUT_S (a hung server), is restarted in place.
tau_probe_user_sim() {
    local main=${1:-}
    [[ -n ${TAU_USER_SIM_INDEX:-} ]] || return 0
    if ! tau_alive "${TAU_PROC_PIDS[$TAU_USER_SIM_INDEX]}"; then
        local status=0
        wait "${TAU_PROC_PIDS[$TAU_USER_SIM_INDEX]}" 2>/dev/null || status=$?
        tau_restart_user_sim "$main" "exited with status $status"
        return
    fi
    ((SECONDS - TAU_USER_SIM_LAST_PROBE >= USER_SIM_HEALTH_INTERVAL_S)) || return 0
    TAU_USER_SIM_LAST_PROBE=$SECONDS
    if tau_http_ok "$(tau_user_sim_health)" "$USER_SIM_HEALTH_TIMEOUT_S"; then
        TAU_USER_SIM_BAD_PROBES=0
        return 0
    fi
    TAU_USER_SIM_BAD_PROBES=$((TAU_USER_SIM_BAD_PROBES + 1))
    tau_log "user simulator: /health gave no answer within ${USER_SIM_HEALTH_TIMEOUT_S}s ($TAU_USER_SIM_BAD_PROBES of USER_SIM_HEALTH_FAILS=$USER_SIM_HEALTH_FAILS in a row)"
    ((TAU_USER_SIM_BAD_PROBES >= USER_SIM_HEALTH_FAILS)) || return 0
    tau_restart_user_sim "$main" "hung: /health unanswered $TAU_USER_SIM_BAD_PROBES times in a row"
}

# Stop what is left of the server's process group, wait the backoff (USER_SIM_RESTART_BACKOFF_S, doubled each
# restart), start the same command on the same GPUs and wait for /health; when it cannot come back, degrade to the
# other nodes' simulators (tau_user_sim_give_up).
tau_restart_user_sim() {
    local main=$1 why=$2 i=$TAU_USER_SIM_INDEX rc=0 up
    local pid=${TAU_PROC_PIDS[$i]} log=${TAU_PROC_LOGS[$i]} lines=${TAU_LOG_TAIL_LINES:-20}
    {
        printf '[tau] the user-simulator server (pid %s) %s; last %s lines of %s:\n' "$pid" "$why" "$lines" "$log"
        tail -n "$lines" -- "$log" 2>/dev/null | sed 's/^/  | /'
    } >&2
    tau_stop_group "$pid"
    if [[ -n ${TAU_USER_SIM_UP_SINCE:-} ]]; then # it was healthy since the last restart: for how long
        up=$((SECONDS - TAU_USER_SIM_UP_SINCE))
        if ((TAU_USER_SIM_RESTARTS > 0 && ${USER_SIM_REFILL_S:-0} > 0 && up >= USER_SIM_REFILL_S)); then
            tau_log "the user simulator was healthy for ${up}s (USER_SIM_REFILL_S=$USER_SIM_REFILL_S): its restart budget is full again ($USER_SIM_MAX_RESTARTS; $TAU_USER_SIM_RESTARTS used before)"
            tau_count_restart "user_sim budget refilled: healthy for ${up}s >= USER_SIM_REFILL_S=$USER_SIM_REFILL_S ($TAU_USER_SIM_RESTARTS restarts before)"
            TAU_USER_SIM_RESTARTS=0
        fi
    fi
    TAU_USER_SIM_UP_SINCE=
    if ((TAU_USER_SIM_RESTARTS >= USER_SIM_MAX_RESTARTS)); then
        tau_user_sim_give_up "$pid" "$why" "$log"
        return 0
    fi
    TAU_USER_SIM_RESTARTS=$((TAU_USER_SIM_RESTARTS + 1))
    local backoff=$((USER_SIM_RESTART_BACKOFF_S * (1 << (TAU_USER_SIM_RESTARTS - 1))))
    tau_count_restart "user_sim restart $TAU_USER_SIM_RESTARTS of $USER_SIM_MAX_RESTARTS: $why (pid $pid, log $log)"
    tau_log "restarting the user simulator in place ($TAU_USER_SIM_RESTARTS of USER_SIM_MAX_RESTARTS=$USER_SIM_MAX_RESTARTS, in ${backoff}s, same command on GPUs $USER_SIM_GPUS); episodes meanwhile fail over or wait (tau_outage_tolerance_s)"
    sleep "$backoff"
    tau_launch_user_sim
    TAU_USER_SIM_BAD_PROBES=0 TAU_USER_SIM_LAST_PROBE=$SECONDS
    tau_wait_user_sim_healthy "$main" || rc=$?
    case $rc in
        0) tau_log "user simulator back (pid ${TAU_PROC_PIDS[$i]}) and healthy after ${TAU_USER_SIM_HEALTHY_AFTER}s" ;;
        1) tau_restart_user_sim "$main" "exited again before it was healthy" ;;
        2) tau_restart_user_sim "$main" "was not healthy ${USER_SIM_TIMEOUT_S}s after its restart (USER_SIM_TIMEOUT_S)" ;;
        3) tau_log "the job ended while the user simulator was restarting" ;;
        4) tau_restart_user_sim "$main" "hung after its restart: /health unanswered within ${USER_SIM_HEALTH_TIMEOUT_S}s $USER_SIM_HEALTH_FAILS times in a row" ;;
    esac
}

# The other nodes' user simulators this run's episodes can go to (USER_SIM_NODES=all): how many.
tau_other_user_sims() { local n; n=$(tau_count "${USER_SIM_BASE_URL:-}"); echo $((n > 0 ? n - 1 : 0)); }

# USER_SIM_MAX_RESTARTS used: with other replicas, this node goes on without its simulator (never `ray stop`: its
# GPUs still train and roll out, and the engine's replica failover sends the episodes to the other simulators);
# alone, the attempt stops naming it.
tau_user_sim_give_up() {
    local pid=$1 why=$2 log=$3 others i=$TAU_USER_SIM_INDEX
    others=$(tau_other_user_sims)
    if ((others == 0)); then
        tau_count_restart "user_sim gave up: $why; USER_SIM_MAX_RESTARTS=$USER_SIM_MAX_RESTARTS restarts used"
        tau_die "the user-simulator server (pid $pid) $why while the run was going; the run stops: USER_SIM_MAX_RESTARTS=$USER_SIM_MAX_RESTARTS restarts used (log $log, restarts in $RUN_DIR/restarts.log)"
    fi
    local rank=${NODE_RANK:-0}
    local url=${USER_SIM_URLS[rank]:-$USER_SIM_BASE_URL} file="$RUN_DIR/user_sim_down.node$rank"
    unset 'TAU_PROC_NAMES[i]' 'TAU_PROC_PIDS[i]' 'TAU_PROC_LOGS[i]' # no longer watched, restarted or stopped
    TAU_USER_SIM_INDEX=
    tau_count_restart "user_sim down for good: $why; USER_SIM_MAX_RESTARTS=$USER_SIM_MAX_RESTARTS restarts used; node $rank degrades to the other $others user simulator(s)"
    printf '[tau] WARNING: ==== node %s has NO user simulator from now on: %s (pid %s) %s and USER_SIM_MAX_RESTARTS=%s restarts are used. This node keeps its Ray node (its GPUs train and roll out); the episodes go to the other %s user simulator(s) in tau_user_base_url (engine replica failover; metric net/replica/user %s/failures_per_episode). Marked in %s; log %s ====\n' \
        "$rank" "$url" "$pid" "$why" "$USER_SIM_MAX_RESTARTS" "$others" "$url" "$file" "$log" >&2
    # the marker last, whole (renamed into place): whoever sees it finds the log line and the warning already written
    printf '%s node=%s url=%s pid=%s restarts=%s why=%s log=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$rank" \
        "$url" "$pid" "$USER_SIM_MAX_RESTARTS" "$why" "$log" >"$file.partial" && mv "$file.partial" "$file"
}

# The head, once every node joined: every other node's user simulator answers /health before the job starts.
tau_wait_user_sims() {
    local rank url start=$SECONDS
    for ((rank = 1; rank < NUM_NODES; rank++)); do
        tau_serves_user_sim "$rank" || continue
        url="${USER_SIM_URLS[$rank]%/v1}/health"
        until tau_http_ok "$url"; do
            ((SECONDS - start < USER_SIM_TIMEOUT_S)) ||
                tau_die "node $rank's user simulator does not answer $url after ${USER_SIM_TIMEOUT_S}s; see runs/<run>/user_sim.log on that node"
            tau_check_procs "while waiting for node $rank's user simulator"
            sleep 5
        done
    done
}
