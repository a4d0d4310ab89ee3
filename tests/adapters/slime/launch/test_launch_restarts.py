"""issue 34 §1-§2: the launch layer keeps a long run going. A user simulator that dies or hangs is restarted in
place while the job runs on; a failure-guard stop naming an endpoint the launcher serves restarts the attempt, a
hosted endpoint's stop stays a stop. With the stand-ins of ``test_launch_scripts`` (ray, SGLang's server, slime's
train.py) and short, configurable probe intervals (no long sleeps)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.adapters.slime.launch.test_launch_scripts import (
    ROOT,
    bash_lib,
    fake_node,
    free_port,
    hosted_config,
    is_running,
    run_script,
    shared_check_cache,  # noqa: F401 - the session's check cache
)

GIVE_UP = """\
TAU_PROC_NAMES=() TAU_PROC_PIDS=() TAU_PROC_LOGS=() RUN_DIR=$TMP/run
USER_SIM_GPUS=2 USER_SIM_BIND_HOST=127.0.0.1 USER_SIM_HOST=127.0.0.1 USER_SIM_TIMEOUT_S=60 USER_SIM_POLL_S=0.1
USER_SIM_RESTART_BACKOFF_S=0 USER_SIM_HEALTH_INTERVAL_S=0 USER_SIM_HEALTH_TIMEOUT_S=1 USER_SIM_HEALTH_FAILS=1
USER_SIM_CMD=("$PYTHON" "$TMP/server.py")
tau_maintain() { :; }
tau_start_user_sim
sleep 120 &
main=$!
trap 'kill $main 2>/dev/null || true' EXIT
tau_watch "$main"
echo "not reached"
"""

SERVER_THAT_DIES = """\
import http.server, os, sys, threading, time
starts = os.path.join(os.environ["TMP"], "starts")
with open(starts, "a") as fh:
    fh.write("start\\n")
first = sum(1 for _ in open(starts)) == 1
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(os.environ["USER_SIM_PORT"])), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("RuntimeError: CUDA out of memory" if first else "loading the model", flush=True)
time.sleep(1 if first else 0.5)
os._exit(7 if first else 9)  # the restarted one dies before it is healthy... or soon after
"""


def test_a_user_simulator_that_cannot_be_brought_back_stops_the_run_naming_it(tmp_path):
    """issue 34 §1: restarts are bounded (USER_SIM_MAX_RESTARTS); then the run stops with one line naming it."""
    (tmp_path / "server.py").write_text(SERVER_THAT_DIES)
    port = str(free_port())
    result = bash_lib(
        GIVE_UP, tmp_path, TMP=str(tmp_path), USER_SIM_PORT=port, USER_SIM_MAX_RESTARTS="2", TAU_WATCH_INTERVAL_S="0.2"
    )
    assert result.returncode == 1 and "not reached" not in result.stdout, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    (error,) = [line for line in lines if line.startswith("error: ")]
    assert (
        error.startswith("error: the user-simulator server (pid ") and "USER_SIM_MAX_RESTARTS=2 restarts used" in error
    )
    assert "while the run was going; the run stops" in error and str(tmp_path / "run/restarts.log") in error
    assert "  | RuntimeError: CUDA out of memory" in lines  # the first death's log tail
    restarts = (tmp_path / "run/restarts.log").read_text().splitlines()
    assert [line.split(" node=0 ", 1)[1].split(":", 1)[0] for line in restarts] == [
        "user_sim restart 1 of 2",
        "user_sim restart 2 of 2",
        "user_sim gave up",
    ]
    assert (tmp_path / "starts").read_text().count("start") == 3


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """The task rows ``fake_node``'s run needs, prepared once (``prepare`` imports τ², ~20 s on a loaded box)."""
    pytest.importorskip("tau2")
    data = tmp_path_factory.mktemp("prepared")
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "prepare", "--out", str(data / "tau2_train.jsonl")]
    cmd += ["--train", "tau2/retail/train", "--eval", "tau2/retail/test", "--eval-samples", "4"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return data


def with_data(tmp_path: Path, prepared: Path) -> None:
    shutil.copytree(prepared, tmp_path / "data")


def wait_for(check, what: str, timeout: float = 120.0) -> None:
    """Poll ``check()`` until it is true (however slow the box), failing the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def healthy(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def starts(records: dict[str, Path]) -> list[dict]:
    path = Path(f"{records['sglang']}.starts")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_user_simulator_killed_or_hung_mid_run_is_restarted_in_place_and_the_job_goes_on(tmp_path, prepared):
    """issue 34 §1: killed (an OOM kill), then hung (SIGSTOP): each time the same command on the same GPUs comes
    back while the job runs on; the job is never restarted; each restart is logged with the log tail and counted."""
    env, records = fake_node(tmp_path)
    with_data(tmp_path, prepared)
    until = tmp_path / "finish"
    env.update(FAKE_TRAIN_SLEEP="240", FAKE_TRAIN_UNTIL=str(until), USER_SIM_RESTART_BACKOFF_S="0", MAX_RESTARTS="0")
    env.update(USER_SIM_HEALTH_INTERVAL_S="0", USER_SIM_HEALTH_TIMEOUT_S="1", USER_SIM_HEALTH_FAILS="2")
    env.update(USER_SIM_POLL_S="0.2", TAU_STOP_WAIT_S="2")
    base = {"HOME": str(tmp_path), "PYTHON": sys.executable, "DATA_DIR": str(tmp_path / "data")}
    base.update(RUN_DIR=str(tmp_path / "run"), CKPT_ROOT=str(tmp_path / "ckpt"))
    base["TAU_CHECK_CACHE_DIR"] = os.environ.get("TAU_CHECK_CACHE_DIR", str(tmp_path / "check-cache"))
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    out_file, err_file = (tmp_path / "stdout").open("w+"), (tmp_path / "stderr").open("w+")
    proc = subprocess.Popen(["bash", str(script)], env={**base, **env}, stdout=out_file, stderr=err_file)
    try:
        wait_for(lambda: Path(f"{records['train']}.pid").exists() or proc.poll() is not None, "the job")
        first = starts(records)[0]
        os.kill(first["pid"], signal.SIGKILL)  # its child stays: the restart stops the whole process group
        wait_for(lambda: len(starts(records)) == 2 or proc.poll() is not None, "the restart after the kill")
        back = lambda n: (tmp_path / "stdout").read_text().count("user simulator back (pid ") >= n  # noqa: E731
        wait_for(lambda: back(1) or proc.poll() is not None, "the restarted server")
        os.kill(starts(records)[1]["pid"], signal.SIGSTOP)  # hung: alive, /health unanswered
        wait_for(lambda: len(starts(records)) == 3 or proc.poll() is not None, "the restart after the hang")
        wait_for(lambda: back(2) or proc.poll() is not None, "the second restarted server")
        until.write_text("")
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        for record in starts(records):
            for pid in (record["pid"], record["child"]):
                if is_running(pid):
                    os.kill(pid, signal.SIGKILL)
    out, err = (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    servers = starts(records)
    assert len(servers) == 3 and all(s["argv"] == servers[0]["argv"] and s["gpus"] == "2" for s in servers)
    head_up = float((tmp_path / "ray.log.head").read_text())
    assert head_up < servers[0]["started"], "Ray's head came up before the user simulator's model load"
    assert not any(is_running(s["child"]) for s in servers), "each dead server's process group was stopped"
    train = json.loads(records["train"].read_text())
    assert train["again"] == "I want a refund", "the job reached the user simulator after its restarts"
    submits = [line for line in (tmp_path / "ray.log").read_text().splitlines() if line.startswith("job submit")]
    assert len(submits) == 1 and "_restart" not in submits[0], "the job itself was never restarted"
    restarts = (tmp_path / "run/restarts.log").read_text().splitlines()
    assert len(restarts) == 2, restarts
    assert "user_sim restart 1 of 3: exited with status 137" in restarts[0]
    assert "user_sim restart 2 of 3: hung: /health unanswered 2 times in a row" in restarts[1]
    log = tmp_path / "run/user_sim.log"
    assert f"exited with status 137; last 20 lines of {log}:" in err and "  | loading the model" in err
    assert out.count("user simulator back (pid ") == 2 and healthy(env["USER_SIM_PORT"]) is False  # stopped at the end


def test_a_guard_stop_on_the_served_user_simulator_restarts_it_and_the_attempt(tmp_path, prepared):
    """issue 34 §2: the failure guard names the user simulator this launcher serves: the attempt ends, the next
    one starts the server again and submits once it is healthy (counted against MAX_RESTARTS)."""
    env, records = fake_node(tmp_path)
    with_data(tmp_path, prepared)
    env.update(FAKE_TRAIN_GUARD="user", MAX_RESTARTS="1", RESTART_DELAY_S="0")
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    servers = starts(records)
    for record in servers:
        for pid in (record["pid"], record["child"]):
            if is_running(pid):
                os.kill(pid, signal.SIGKILL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "on the user endpoint (FailureGuardError in" in result.stderr and "which this launcher serves" in result.stderr
    )
    assert len(servers) == 2, "the server was started again"
    submits = [line for line in (tmp_path / "ray.log").read_text().splitlines() if line.startswith("job submit")]
    assert len(submits) == 2 and "--submission-id" in submits[1] and "_restart1" in submits[1]
    out = result.stdout
    healthy_again = out.index("user simulator healthy at", out.index("restart 1 of 1"))
    assert healthy_again < out.index("submitting ", healthy_again), "submitted once the new server was healthy"
    restarts = (tmp_path / "run/restarts.log").read_text()
    assert "attempt restart 1 of 1: attempt 1 was stopped by the failure guard on an endpoint this launcher serves" in (
        restarts
    )
    assert json.loads(records["train"].read_text())["first_words"] == "I want a refund"


def test_a_guard_stop_on_a_hosted_user_endpoint_stays_a_stop(tmp_path, prepared):
    """issue 34 §2: a hosted endpoint is not the launcher's to restart: exit 4, today's message, one attempt."""
    env, records = fake_node(tmp_path)
    with_data(tmp_path, prepared)
    port = free_port()
    code = (
        "from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer\n"
        f"ChatUserServer(host='127.0.0.1', port={port}).serve_forever()"
    )
    server = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, "the hosted user server", 60)
        env.update(FAKE_TRAIN_GUARD="user", MAX_RESTARTS="2", RESTART_DELAY_S="0", USER_SIM_GPUS="")
        env.update(TAU_CONFIG=str(hosted_config(tmp_path, port)), TAU_TEST_USER_KEY="k")
        result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    finally:
        server.kill()
        server.wait()
    assert result.returncode == 4, result.stdout[-3000:] + result.stderr[-3000:]
    assert "error: the failure guard stopped the run (FailureGuardError in " in result.stderr
    assert "not restarted: fix the endpoint it names" in result.stderr
    submits = [line for line in (tmp_path / "ray.log").read_text().splitlines() if line.startswith("job submit")]
    assert len(submits) == 1 and not starts(records)
    assert not (tmp_path / "run/restarts.log").exists()


def guard_line(endpoint: str) -> str:
    """The failure guard's own stop, as train.py's output shows it (group_filter.FailureGuard)."""
    from slime_tau_plugin.adapters.slime.group_filter import FailureGuard, FailureGuardSettings

    meta = {"termination_reason": "user_error", "failed_endpoint": endpoint, "error": "connection refused"}
    failed = SimpleNamespace(status=SimpleNamespace(name="FAILED"), metadata=meta)
    with pytest.raises(Exception) as stop:
        FailureGuard(FailureGuardSettings(0.5, 1)).observe([failed] * 4)
    return f"slime_tau_plugin.engine.errors.FailureGuardError: {stop.value}\n"


@pytest.mark.parametrize(
    ("endpoint", "config", "served", "status"),
    [
        ("user", {"tau_user_base_url": "http://127.0.0.1:30010/v1"}, True, 76),  # the launcher's own server
        ("user", {"tau_user_base_url": "https://api.example.com/v1"}, False, 4),  # hosted: today's stop
        ("customer", {"tau_user_base_url": "http://127.0.0.1:30010/v1"}, True, 76),  # the review's stop (#44)
        ("customer", {"tau_user_base_url": "https://api.example.com/v1"}, False, 4),  # ... on a hosted customer
        ("judge", {"tau_judge_base_url": "http://127.0.0.1:30010/v1"}, True, 76),  # a judge at our server's URL
        ("judge", {"tau_judge_base_url": "https://judge.example.com/v1"}, True, 4),
        ("policy", {"tau_user_base_url": "http://127.0.0.1:30010/v1"}, True, 4),  # slime's router: not ours
    ],
)
def test_a_guard_stop_restarts_only_an_endpoint_the_launcher_serves(tmp_path, endpoint, config, served, status):
    body = 'TAU_PROC_PIDS=() TAU_RAY_STARTED=1; echo "status $(tau_exit_status 1)"'
    log = tmp_path / "run/train.log"
    log.parent.mkdir()
    earlier = guard_line("user")  # an earlier attempt's stop, before this attempt's offset: not this attempt's
    log.write_text(earlier + "step 1\n" + guard_line(endpoint))
    (tmp_path / "run/tau_config.yaml").write_text(yaml.safe_dump(config))
    env = dict(RUN_DIR=str(tmp_path / "run"), TAU_CONFIG_RUN=str(tmp_path / "run/tau_config.yaml"))
    env.update(START_USER_SIM="1" if served else "0", USER_SIM_BASE_URL="http://127.0.0.1:30010/v1")
    env.update(TAU_SUPERVISED="1", TAU_TRAIN_LOG_START=str(len(earlier.encode())), TAU_JOB_SUBMITTED="1")
    result = bash_lib(body, tmp_path, **env)
    assert f"status {status}" in result.stdout, result.stdout + result.stderr
    if status == 4:
        assert "error: the failure guard stopped the run (FailureGuardError in" in result.stderr
    else:
        assert f"on the {endpoint} endpoint (FailureGuardError in" in result.stderr
    # the same log from the earlier attempt's offset on... without it, only a crash after that line
    log.write_text(earlier + "RuntimeError: NCCL timeout\n")
    assert "status 75" in bash_lib(body, tmp_path, **env).stdout
    # an attempt that never submitted the job (its server never got healthy) reads no earlier stop as its own
    log.write_text(guard_line(endpoint))
    assert "status 75" in bash_lib(body, tmp_path, **{**env, "TAU_JOB_SUBMITTED": "0"}).stdout


def test_the_launcher_reads_every_endpoint_the_guard_can_name_from_its_stop_line():
    """Whatever endpoint the guard names (every key of its ENDPOINTS, new ones included), the launcher reads it
    back from the stop line in train.log (scripts/lib/tau_guard.py), never a neighbour's."""
    import importlib.util

    from slime_tau_plugin.adapters.slime.group_filter import ENDPOINTS, FailureGuard, FailureGuardSettings

    spec = importlib.util.spec_from_file_location("tau_guard", ROOT / "scripts/lib/tau_guard.py")
    tau_guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tau_guard)
    for key in ENDPOINTS:
        if key in ("deadline", "user_token_budget"):
            meta = {"termination_reason": key}
        elif key == "other":
            meta = {}
        else:
            meta = {"termination_reason": "env_error", "failed_endpoint": key}
        failed = SimpleNamespace(
            status=SimpleNamespace(name="FAILED"), metadata={**meta, "error": f"x on {ENDPOINTS['user']}"}
        )
        with pytest.raises(Exception) as stop:
            FailureGuard(FailureGuardSettings(0.5, 1)).observe([failed] * 4)
        text = f"step 3\nslime_tau_plugin.engine.errors.FailureGuardError: {stop.value}\n"
        assert tau_guard.stop_endpoint(text) == key, stop.value
    assert tau_guard.stop_endpoint("RuntimeError: NCCL timeout\n") is None
