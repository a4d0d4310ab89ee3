"""Episode workers as local processes (``tau_episode_workers: N``, ``tau_episode_worker_kind: process``).

Each worker is ``python -m slime_tau_plugin.engine.workers.worker_process`` holding one end of a private socket
pair (so it needs no port, no auth and no ``__main__`` of the trainer's process, which may be a Ray worker).
Per worker, two threads in the trainer's process: a writer that pickles and sends requests (the caller's loop
only queues them) and a reader that unpickles answers and resolves the callers' futures; the reader's end of
file is the worker's death.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from slime_tau_plugin.engine.choices import WorkerKind
from slime_tau_plugin.engine.workers.pools import Pending, WorkerPool, WorkerSlot


class ProcessSlot(WorkerSlot):
    """One local worker process and its two threads."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        super().__init__(pool, index)
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "slime_tau_plugin.engine.workers.worker_process", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=os.environ.copy(),
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outbox.put(("config", pool.config, self.name))
        threading.Thread(target=self._write, name=f"tau-{index}-write", daemon=True).start()
        threading.Thread(target=self._read, name=f"tau-{index}-read", daemon=True).start()

    def submit(self, pending: Pending) -> None:
        self._outbox.put(("run", pending.request))

    def abort(self, request_id: str) -> None:
        self._outbox.put(("abort", request_id))

    def close(self) -> None:
        self.alive = False
        self._outbox.put(None)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def _write(self) -> None:
        while True:
            message = self._outbox.get()
            if message is None:
                break
            try:
                self._conn.send(message)
            except (OSError, EOFError):
                break  # the reader reports the death
        try:
            self._conn.send(("stop",))
        except (OSError, EOFError):
            pass

    def _read(self) -> None:
        while True:
            try:
                kind, request_id, payload = self._conn.recv()
            except (EOFError, OSError):
                break
            if kind == "done":
                self.pool.completed(self, request_id, finished=payload)
            else:
                self.pool.completed(self, request_id, error=payload)
        code = self.process.wait()
        self.pool.died(self, f"pid {self.process.pid} exited with code {code}")


class ProcessPool(WorkerPool):
    """``tau_episode_workers`` local worker processes."""

    kind = WorkerKind.PROCESS

    def _start(self, index: int) -> WorkerSlot:
        return ProcessSlot(self, index)
