"""The soak's servers, each in its own process: the oracle policy (``serve_policy``, ``slime-tau serve``'s server
with bounded request logs) and the scripted LLM user (``slime-tau serve-user``).

Separate processes on purpose: an outage is the process killed (SIGTERM, then SIGKILL) and a new one
started on the same port, as when a real server restarts, and the servers' CPU and memory are not the
soak's own (its RSS is the plugin's). A server's fault counts die with it, so they are read from
``GET /faults`` just before each kill and added up. The HTTP here is blocking (stdlib): callers on the
event loop run these methods through ``asyncio.to_thread``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from slime_tau_plugin.tools.faults.spec import SEED_VAR, SPEC_VAR

STOP_GRACE_S = 10.0
"""After SIGTERM, how long a server gets to exit before SIGKILL."""


class ServerStartError(RuntimeError):
    """A server process exited or did not answer its health check in time (the message quotes its log)."""


def free_port() -> int:
    """A TCP port nobody listens on now (the child binds it a moment later; a race we accept in a soak)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """One ``python -m <module> <command...> --port P`` child, restartable on the same port."""

    def __init__(
        self, name: str, module: str, command: list[str], *, health_path: str, log_dir: Path, seed: int | None = None
    ) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [sys.executable, "-m", module, *command, "--port", str(self.port)]
        self.health_path = health_path
        self.log_path = log_dir / f"{name}.log"
        self.env = {k: v for k, v in os.environ.items() if k not in (SPEC_VAR, SEED_VAR)}
        if seed is not None:  # the draws of every incarnation repeat; the flag's spec, never the soak's env
            self.env[SEED_VAR] = str(seed)
        self.injected: Counter[str] = Counter()
        """Faults counted by incarnations already killed."""
        self.starts = 0
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log_path.open("a") as log:
            log.write(f"--- start {self.starts + 1}: {' '.join(self.argv)}\n")
            log.flush()
            self._process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env
            )
        self.starts += 1

    def wait_healthy(self, timeout_s: float = 300.0) -> None:
        """Return once ``GET health_path`` answers 200.

        Raises:
            ServerStartError: the process exited, or ``timeout_s`` passed; the message ends with its log.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise ServerStartError(f"the {self.name} server exited at start: {self._log_tail()}")
            try:
                with urllib.request.urlopen(self.url + self.health_path, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise ServerStartError(f"the {self.name} server did not answer in {timeout_s:g}s: {self._log_tail()}")

    def fault_counts(self) -> dict[str, int]:
        """Faults injected so far by every incarnation, by kind name (the live one's from ``GET /faults``)."""
        total = Counter(self.injected)
        total.update(self._live_counts())
        return dict(total)

    def kill(self) -> None:
        """Read the fault counts, then end the process for real (SIGTERM, SIGKILL after the grace)."""
        self.injected.update(self._live_counts())
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def rss_mb(self) -> float | None:
        """The live process's resident memory in MB (None when it is not running)."""
        from slime_tau_plugin.tools.soak.monitor import rss_mb

        return rss_mb(self._process.pid) if self._process is not None else None

    def _live_counts(self) -> dict[str, int]:
        if self._process is None or self._process.poll() is not None:
            return {}
        try:
            with urllib.request.urlopen(self.url + "/faults", timeout=10) as reply:
                return dict(json.load(reply).get("injected") or {})
        except (OSError, ValueError):  # a fault on /faults itself is not injected (control route)
            return {}

    def _log_tail(self, lines: int = 5) -> str:
        try:
            tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            tail = []
        return " | ".join(line.strip() for line in tail if line.strip()) or f"(no output; see {self.log_path})"


def policy_server(
    tokenizer: str, spec: str, *, domain: str, split: str, latency_ms: float, log_dir: Path, seed: int | None
) -> ServerProcess:
    """The oracle for tau2/``domain``/``split`` (Qwen2.5 tool calls), with the policy-side faults."""
    command = ["--domain", domain, "--split", split, "--tokenizer", tokenizer, "--latency-ms", f"{latency_ms:g}"]
    if spec:
        command += ["--faults", spec]
    module = "slime_tau_plugin.tools.soak.serve_policy"
    return ServerProcess("policy", module, command, health_path="/health", log_dir=log_dir, seed=seed)


def user_server(spec: str, *, latency_ms: float, max_replies: int, log_dir: Path, seed: int | None) -> ServerProcess:
    """``slime-tau serve-user``: the scripted OpenAI-compatible customer, with the user-side faults."""
    command = ["serve-user", "--latency-ms", f"{latency_ms:g}", "--max-replies", str(max_replies)]
    if spec:
        command += ["--faults", spec]
    return ServerProcess(
        "user", "slime_tau_plugin.tools.cli", command, health_path="/v1/models", log_dir=log_dir, seed=seed
    )
