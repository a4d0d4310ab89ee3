"""issue 44 §1: restarts that last a 20-hour run. Restart budgets refill after a healthy stretch (the supervisor's
and the user simulator's), a simulator that hangs right after its restart meets the hang probe, a worker node whose
simulator cannot come back keeps its Ray node and its episodes go to the other replica, and the review's stop on
the customer this launcher serves restarts it. The real bash scripts with stand-in processes, as in
``test_launch_scripts`` and ``test_launch_restarts``; windows and timeouts are short env settings, and nothing
asserts how long anything took."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from tests.adapters.slime.launch.test_launch_restarts import (
    prepared as prepared_rows,  # noqa: F401 - the task rows, prepared once per module
)
from tests.adapters.slime.launch.test_launch_restarts import (
    starts,
    wait_for,
    with_data,
)
from tests.adapters.slime.launch.test_launch_scripts import (
    ROOT,
    bash_lib,
    fake_node,
    free_port,
    is_running,
    run_script,
    shared_check_cache,  # noqa: F401 - the session's check cache
)
from tests.adapters.slime.test_generate_e2e import make_samples
from tests.contracts.slime_sample import Sample
from tests.engine.net.test_outages import _llm_args, _play
from tests.invariants import assert_sample_invariants

SCRIPT = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"

SUPERVISED = """\
MAX_RESTARTS=3 RESTART_DELAY_S=0 NODE_RANK=0 LOAD=/ckpt RUN_NAME=test_run RUN_DIR=$TMP
read -r -a CODES <<<"$CODES"
read -r -a SLEEPS <<<"$SLEEPS"
attempt() { echo "$TAU_ATTEMPT" >>"$TMP/attempts"; sleep "${SLEEPS[$TAU_ATTEMPT]}"; exit "${CODES[$TAU_ATTEMPT]}"; }
tau_supervise attempt || echo "supervised: $?"
"""


def test_a_crash_after_a_healthy_stretch_is_restarted_though_three_came_before(tmp_path):
    """Three quick crashes use MAX_RESTARTS=3; the fourth attempt ran RESTART_REFILL_S before it crashed, so it
    is restarted (the budget is full again), and the fifth ends the run cleanly."""
    env = dict(TMP=str(tmp_path), CODES="75 75 75 75 0", SLEEPS="0 0 0 5 0", RESTART_REFILL_S="5")
    result = bash_lib(SUPERVISED, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "attempts").read_text().split() == ["0", "1", "2", "3", "4"]
    assert "supervised" not in result.stdout, result.stdout  # the run ended with the last attempt's 0
    assert "the restart budget is full again (3; 3 used before)" in result.stdout
    log = [line.split(" node=0 ", 1)[1] for line in (tmp_path / "restarts.log").read_text().splitlines()]
    assert [line.split(":", 1)[0] for line in log] == [
        "attempt restart 1 of 3",
        "attempt restart 2 of 3",
        "attempt restart 3 of 3",
        "attempt budget refilled",
        "attempt restart 1 of 3",
    ]
    # the same crashes without the healthy stretch (RESTART_REFILL_S=0: never refilled): the fourth ends the run,
    # with the crash's own status, 75, as the docs say
    (tmp_path / "attempts").unlink()
    again = bash_lib(SUPERVISED, tmp_path, **{**env, "RESTART_REFILL_S": "0"})
    assert "supervised: 75" in again.stdout, again.stdout + again.stderr
    assert (tmp_path / "attempts").read_text().split() == ["0", "1", "2", "3"]
    assert "MAX_RESTARTS=3 restarts used" in again.stdout


SIM = """\
TAU_PROC_NAMES=() TAU_PROC_PIDS=() TAU_PROC_LOGS=() RUN_DIR=$TMP/run NODE_RANK=0
USER_SIM_GPUS=2 USER_SIM_BIND_HOST=127.0.0.1 USER_SIM_HOST=127.0.0.1 USER_SIM_POLL_S=0.1
USER_SIM_RESTART_BACKOFF_S=0 USER_SIM_HEALTH_INTERVAL_S=0 USER_SIM_HEALTH_TIMEOUT_S=1 USER_SIM_HEALTH_FAILS=2
USER_SIM_BASE_URL=http://127.0.0.1:$USER_SIM_PORT/v1 USER_SIM_URLS=("$USER_SIM_BASE_URL")
USER_SIM_CMD=("$PYTHON" "$TMP/server.py")
tau_maintain() { :; }
tau_start_user_sim
bash -c 'until [[ -f $TMP/done ]]; do sleep 0.1; done' &
main=$!
trap 'kill $main 2>/dev/null || true; for p in "${TAU_PROC_PIDS[@]}"; do tau_stop_group "$p"; done' EXIT
tau_watch "$main"
echo "the job ended; the run went on"
"""

SERVER = """\
# A user simulator whose Nth start behaves as BEHAVIOUR[N] says: "die" (answers /health, then exits soon after),
# "up=S" (answers for S seconds, then exits), "hang" (takes connections, never answers), "load=S" (port closed
# for S seconds, as while loading, then up for good) or "up" (up for good; the test ends once one is healthy).
import http.server, os, socket, sys, threading, time
tmp = os.environ["TMP"]
with open(os.path.join(tmp, "starts"), "a") as fh:
    fh.write("start\\n")
n = sum(1 for _ in open(os.path.join(tmp, "starts")))
kind = os.environ["BEHAVIOUR"].split()[n - 1]
port = int(os.environ["USER_SIM_PORT"])
print(f"start {n}: {kind}", flush=True)
if kind == "hang":
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    time.sleep(600)
if kind.startswith("load="):
    time.sleep(float(kind.split("=")[1]))
answered = threading.Event()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        answered.set()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
answered.wait()  # the launcher saw it healthy: what follows is "while the run was going"
if kind == "die":
    time.sleep(0.3)
    os._exit(7)
if kind.startswith("up="):
    time.sleep(float(kind.split("=")[1]))
    os._exit(9)
open(os.path.join(tmp, "done"), "w").close()
time.sleep(600)
"""


def run_sim(tmp_path: Path, behaviour: str, **env: str):
    (tmp_path / "server.py").write_text(SERVER)
    env = dict(TMP=str(tmp_path), USER_SIM_PORT=str(free_port()), BEHAVIOUR=behaviour, **env)
    env.setdefault("USER_SIM_TIMEOUT_S", "60")
    env.setdefault("TAU_WATCH_INTERVAL_S", "0.1")
    env.setdefault("TAU_STOP_WAIT_S", "2")
    result = bash_lib(SIM, tmp_path, **env)
    log = tmp_path / "run/restarts.log"
    lines = [line.split(" node=0 ", 1)[1] for line in log.read_text().splitlines()] if log.exists() else []
    return result, lines, (tmp_path / "starts").read_text().count("start")


def test_a_user_simulator_healthy_for_a_stretch_gets_its_restarts_back(tmp_path):
    """Three quick deaths use USER_SIM_MAX_RESTARTS=3; the fourth server stayed healthy USER_SIM_REFILL_S, so its
    death is restarted again (a single server: without the refill the run would stop here)."""
    # the quick deaths are up well under a second: the window's margin is wide for a loaded box
    result, restarts, started = run_sim(
        tmp_path, "die die die up=9 up", USER_SIM_MAX_RESTARTS="3", USER_SIM_REFILL_S="8"
    )
    assert result.returncode == 0 and "the run went on" in result.stdout, result.stdout + result.stderr
    assert started == 5
    assert [line.split(":", 1)[0] for line in restarts] == [
        "user_sim restart 1 of 3",
        "user_sim restart 2 of 3",
        "user_sim restart 3 of 3",
        "user_sim budget refilled",
        "user_sim restart 1 of 3",
    ]
    assert "its restart budget is full again (3; 3 used before)" in result.stdout
    # never refilled (USER_SIM_REFILL_S=0): the fourth death ends the run, naming the server
    for name in ("starts", "done", "run/restarts.log"):
        (tmp_path / name).unlink(missing_ok=True)
    result, restarts, started = run_sim(
        tmp_path, "die die die up=1 up", USER_SIM_MAX_RESTARTS="3", USER_SIM_REFILL_S="0"
    )
    assert result.returncode == 1 and "the run went on" not in result.stdout
    assert "USER_SIM_MAX_RESTARTS=3 restarts used" in result.stderr and started == 4
    assert restarts[-1].startswith("user_sim gave up: exited with status 9")


def test_a_simulator_that_hangs_right_after_its_restart_meets_the_hang_probe(tmp_path):
    """The restarted server takes connections and never answers: USER_SIM_HEALTH_FAILS timed-out probes end the
    wait and restart it again, long before USER_SIM_TIMEOUT_S (here 600 s, beyond the test's own limit). A server
    still loading (its port closed for a while) is not taken for hung."""
    result, restarts, started = run_sim(
        tmp_path, "die hang load=2 up", USER_SIM_MAX_RESTARTS="3", USER_SIM_TIMEOUT_S="600"
    )
    assert result.returncode == 0 and "the run went on" in result.stdout, result.stdout + result.stderr
    assert started == 3
    assert restarts[0].startswith("user_sim restart 1 of 3: exited with status 7")
    assert restarts[1].startswith(
        "user_sim restart 2 of 3: hung after its restart: /health unanswered within 1s 2 times in a row"
    )
    assert len(restarts) == 2, restarts  # the loading one came up: no third restart


WORKER_SERVER = """\
# `python -m sglang.launch_server` on a worker node whose simulator cannot stay up: it answers /health, then dies.
import argparse, http.server, os, threading, time
parser = argparse.ArgumentParser()
parser.add_argument("--host")
parser.add_argument("--port", type=int)
ns, _ = parser.parse_known_args()
with open(os.environ["FAKE_SGLANG_RECORD"] + ".starts", "a") as fh:
    fh.write(f'{{"pid": {os.getpid()}, "child": {os.getpid()}}}\\n')
answered = threading.Event()


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        answered.set()

    def log_message(self, *args):
        pass


threading.Thread(target=http.server.ThreadingHTTPServer((ns.host, ns.port), Health).serve_forever, daemon=True).start()
answered.wait()
time.sleep(0.3)
print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
os._exit(7)
"""


def test_a_worker_whose_simulator_dies_for_good_keeps_its_ray_and_its_episodes_go_to_the_other_replica(
    tmp_path,
    prepared_rows,  # noqa: F811 - the imported fixture
    tau2_backend,
    qwen25,
    qwen25_dir,
    oracle_server_factory,
):
    env, records = fake_node(tmp_path)
    with_data(tmp_path, prepared_rows)
    (tmp_path / "py/sglang/launch_server.py").write_text(WORKER_SERVER)
    head = socket.socket()  # the head's Ray port: node 1 joins once it answers
    head.bind(("127.0.0.2", 0))
    head.listen()
    release = tmp_path / "ray-join-ends"
    env.update(NODE_ADDRS="127.0.0.2,127.0.0.1", NODE_RANK="1", RAY_PORT=str(head.getsockname()[1]))
    env.update(SHARED_STORAGE="1", MAX_RESTARTS="0", USER_SIM_MAX_RESTARTS="1", USER_SIM_RESTART_BACKOFF_S="0")
    env.update(USER_SIM_HEALTH_INTERVAL_S="0", USER_SIM_POLL_S="0.1", TAU_STOP_WAIT_S="2")
    env.update(FAKE_RAY_BLOCK_UNTIL=str(release))
    base = {"HOME": str(tmp_path), "PYTHON": sys.executable, "DATA_DIR": str(tmp_path / "data")}
    base.update(RUN_DIR=str(tmp_path / "run"), CKPT_ROOT=str(tmp_path / "ckpt"))
    base["TAU_CHECK_CACHE_DIR"] = os.environ.get("TAU_CHECK_CACHE_DIR", str(tmp_path / "check-cache"))
    out_file, err_file = (tmp_path / "stdout").open("w+"), (tmp_path / "stderr").open("w+")
    proc = subprocess.Popen(["bash", str(SCRIPT)], env={**base, **env}, stdout=out_file, stderr=err_file)
    down = tmp_path / "run/user_sim_down.node1"
    live = None
    try:
        wait_for(lambda: down.exists() or proc.poll() is not None, "node 1's simulator given up", 180)
        err = (tmp_path / "stderr").read_text()
        assert proc.poll() is None, (tmp_path / "stdout").read_text()[-3000:] + err[-3000:]
        # the node goes on: its Ray join still runs, and nothing stopped Ray
        join_pid = int(Path(f"{release}.pid").read_text())
        assert is_running(join_pid)
        ray_calls = [line.split(" | ")[0] for line in (tmp_path / "ray.log").read_text().splitlines()]
        assert [call.split()[:2] for call in ray_calls] == [["start", "--address"]], ray_calls
        (warning,) = [line for line in err.splitlines() if line.startswith("[tau] WARNING: ==== node 1 has NO user")]
        port = env["USER_SIM_PORT"]
        assert f"http://127.0.0.1:{port}/v1" in warning and "keeps its Ray node" in warning
        assert "the episodes go to the other 1 user simulator(s)" in warning and str(down) in warning
        assert f"url=http://127.0.0.1:{port}/v1 " in down.read_text()
        restarts = (tmp_path / "run/restarts.log").read_text().splitlines()
        assert "user_sim restart 1 of 1: exited with status 7" in restarts[0]
        assert "user_sim down for good: exited with status 7" in restarts[1] and len(restarts) == 2
        # the episodes: the run's own user URLs (the head's replica up, this node's gone) lose no sample
        urls = yaml.safe_load((tmp_path / "run/tau_config.yaml").read_text())["tau_user_base_url"]
        assert urls == f"http://127.0.0.2:{port}/v1,http://127.0.0.1:{port}/v1"
        live = ChatUserServer(host="127.0.0.2", port=int(port), latency_s=0.1, max_replies=2).start()
        policy = oracle_server_factory(qwen25, (("retail", "train"),))
        args = _llm_args(policy, qwen25_dir, live)
        args.tau_user_base_url = urls
        samples = make_samples(tau2_backend, "retail", "train", 4)
        _play(args, samples)
        head_sim, gone = f"user http://127.0.0.2:{port}/v1", f"user http://127.0.0.1:{port}/v1"
        for sample in samples:
            assert_sample_invariants(sample)
            assert sample.status is Sample.Status.COMPLETED and sample.reward == 1.0, sample.metadata.get("error")
            tried, failed = sample.metadata["replica_requests"], sample.metadata["replica_failures"]
            assert tried[head_sim] >= 1 and not failed.get(head_sim), (tried, failed)
            assert tried.get(gone, 0) == failed.get(gone, 0), "node 1's address answered nothing"
        assert live.requests
        assert is_running(join_pid) and proc.poll() is None, "the node stayed in the cluster meanwhile"
        release.write_text("")  # the head's cluster stops: the node's Ray join ends, then the node cleans up
        proc.wait(timeout=120)
    finally:
        head.close()
        if live is not None:
            live.stop()
        if proc.poll() is None:
            proc.kill()
        for record in starts(records):
            if is_running(record["pid"]):
                os.kill(record["pid"], signal.SIGKILL)
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
    calls = [line.split(" | ")[0].split()[0] for line in (tmp_path / "ray.log").read_text().splitlines()]
    assert calls == ["start", "stop"], "Ray was stopped only after the node's own join ended"
    assert len(starts(records)) == 2


def test_a_review_stop_on_the_customer_restarts_the_simulator_it_names(
    tmp_path,
    prepared_rows,  # noqa: F811 - the imported fixture
):
    """The failure guard's review share (``tau_review_max_error_share``) names the customer, played by the
    simulator this launcher serves: the attempt ends, the next one starts that server again and submits once it
    is healthy (counted against MAX_RESTARTS); without supervision it stays a stop (exit 4)."""
    env, records = fake_node(tmp_path)
    with_data(tmp_path, prepared_rows)
    env.update(FAKE_TRAIN_GUARD="customer", MAX_RESTARTS="1", RESTART_DELAY_S="0")
    result = run_script(SCRIPT, tmp_path, **env)
    servers = starts(records)
    for record in servers:
        for pid in (record["pid"], record["child"]):
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "stopped the run on the customer endpoint (FailureGuardError in" in result.stderr
    assert len(servers) == 2, "the simulator was started again"
    out = result.stdout
    healthy_again = out.index("user simulator healthy at", out.index("restart 1 of 1"))
    assert healthy_again < out.index("submitting ", healthy_again), "submitted once the new server was healthy"
    assert "attempt restart 1 of 1: attempt 1 was stopped by the failure guard on an endpoint this launcher" in (
        (tmp_path / "run/restarts.log").read_text()
    )
    submits = [line for line in (tmp_path / "ray.log").read_text().splitlines() if line.startswith("job submit")]
    assert len(submits) == 2 and "_restart1" in submits[1]
    assert json.loads(records["train"].read_text())["first_words"] == "I want a refund"


def test_the_plan_states_evals_cost_as_time_bounded_by_the_episode_deadline(tmp_path):
    """issue 44 §2: an eval lasts as long as its slowest episode (slime plays them at once), so the plan gives its
    cost in time: about one rollout's generation each, and at most the deadline per eval."""
    result = run_script(SCRIPT, tmp_path)
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("[tau] eval cost: ")]
    assert "400 episodes, 31 times in 300 rollouts" in line and "lasts as long as the slowest" in line
    assert "~1 rollout's generation time each, 31 evals ~10% on top of the 300 rollouts' generation time" in line
    assert "tau_episode_timeout_s=1800 bounds each eval at 30 min: at most 15.5 h of training blocked" in line
    assert "%" not in line.split("generation time each", 1)[0], "no share of episodes"
    # the cadence moves the time; without a deadline nothing bounds an eval
    config = yaml.safe_load((ROOT / "configs/qwen3_4B_instruct_2507_tau2.yaml").read_text())
    config["tau_episode_timeout_s"] = None
    (tmp_path / "no_deadline.yaml").write_text(yaml.safe_dump(config))
    other = run_script(SCRIPT, tmp_path, EVAL_INTERVAL="50", TAU_CONFIG=str(tmp_path / "no_deadline.yaml"))
    (line,) = [line for line in other.stdout.splitlines() if line.startswith("[tau] eval cost: ")]
    assert "7 times in 300 rollouts" in line and "7 evals ~2% on top" in line
    assert "no tau_episode_timeout_s: nothing bounds an eval's time but its slowest episode" in line
