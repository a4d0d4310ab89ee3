"""``slime-tau serve --model DIR``: a real causal LM behind the SGLang/vLLM routes (``model/server.py``).

Kept apart from ``serve.py`` (the fake models) so that torch is imported only when ``--model`` is given.
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def run(ns: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from slime_tau_plugin.tools.model.decoder import ModelDecoder
    from slime_tau_plugin.tools.model.server import ModelServer

    started = time.perf_counter()
    decoder = ModelDecoder(ns.model)
    server = ModelServer(decoder, host=ns.host, port=ns.port)
    server.start()
    print(
        f"serving model={ns.model} on {decoder.device} at {server.url} after {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    print("Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
