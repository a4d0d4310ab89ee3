"""A local episode worker: ``python -m slime_tau_plugin.engine.workers.worker_process FD``.

The trainer's process (``process_pool.py``) starts it with one end of a socket pair as file descriptor FD and sends
``("config", TauConfig, name)`` first, then ``("run", EpisodeRequest)``, ``("abort", request_id)`` and
``("stop",)``; the worker answers ``("done", request_id, FinishedEpisode)`` or ``("error", request_id,
exception)``. Messages are pickled by ``multiprocessing.connection`` over a private socket pair, so only its parent
can talk to it. The worker owns its event loop: a reader thread hands messages to it and a writer thread sends
answers, so neither pickling nor the socket ever blocks an episode. It exits when its parent's end closes.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from slime_tau_plugin.engine.workers.host import EpisodeHost, portable_error

logger = logging.getLogger(__name__)


async def serve(conn: Connection) -> None:
    """Answer the parent's requests until it closes its end or says stop."""
    kind, config, name = conn.recv()
    if kind != "config":
        raise RuntimeError(f"episode worker: expected a config first, got {kind!r}")
    host = EpisodeHost(config, name)
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    tasks: set[asyncio.Task[None]] = set()

    async def play(request: Any) -> None:
        try:
            outbox.put(("done", request.request_id, await host.play(request)))
        except BaseException as exc:  # a ConfigError (or a bug): the parent raises it where the sample waits
            outbox.put(("error", request.request_id, portable_error(exc)))

    def dispatch(message: tuple[Any, ...]) -> None:
        if message[0] == "run":
            task = loop.create_task(play(message[1]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif message[0] == "abort":
            host.abort(message[1])
        else:
            stopped.set()

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            loop.call_soon_threadsafe(dispatch, message)
        loop.call_soon_threadsafe(stopped.set)

    def write() -> None:
        while True:
            message = outbox.get()
            if message is None:
                return
            try:
                conn.send(message)
            except (EOFError, OSError):
                return

    threading.Thread(target=read, name="tau-worker-read", daemon=True).start()
    threading.Thread(target=write, name="tau-worker-write", daemon=True).start()
    await host.warm()
    await stopped.wait()
    outbox.put(None)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the parent's to handle; it closes us
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s [worker] %(message)s")
    asyncio.run(serve(Connection(int(argv[0]))))


if __name__ == "__main__":
    main()
