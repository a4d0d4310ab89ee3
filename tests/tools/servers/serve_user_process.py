"""``slime-tau serve-user`` in a process of its own, for the customer-fault tests of every fault set.

Its port is the one the OS gave (``--port 0``), read off the line it prints when it serves, so two test modules
never race for a port; ``TAU_FAULTS_SEED`` is always set, so a test's draws are the same on every run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator

URL = re.compile(r"serving the scripted user simulator at (http://\S+)/v1")
CLI = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "serve-user"]


def serve_user(*args: str, seed: str) -> Iterator[str]:
    """Yields the base URL of a serve-user (``--max-replies 2`` and ``args``) until the caller is done."""
    env = {**os.environ, "TAU_FAULTS_SEED": seed}
    cmd = [*CLI, "--port", "0", "--max-replies", "2", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    found = threading.Event()

    def drain() -> None:
        for line in proc.stdout:
            lines.append(line)
            if URL.search(line):
                found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    found.wait(300)  # a hang guard on a loaded box, not a time bound
    url = next((m.group(1) for m in map(URL.search, lines) if m), None)
    try:
        assert url, "".join(lines)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
