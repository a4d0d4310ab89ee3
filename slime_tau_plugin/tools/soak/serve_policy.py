"""The soak's policy process: ``slime-tau serve``'s oracle, with its request logs bounded.

``python -m slime_tau_plugin.tools.soak.serve_policy --domain retail --split train --tokenizer DIR --port P
[--latency-ms MS] [--faults SPEC]`` builds the same server as ``slime-tau serve --benchmark tau2`` (through
``servers.build_sglang_server``) and serves it until killed. Why not ``slime-tau serve`` itself:
it serves one task set only, and its request logs (``requests``, ``request_headers``: tests read them; ~0.1 MB
a /generate body) keep the last :data:`KEPT_REQUESTS` entries instead of the server's default
(``servers.http_base.REQUEST_LOG_LIMIT``); everything else is the same server.
"""

from __future__ import annotations

import argparse

KEPT_REQUESTS = 256


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="slime_tau_plugin.tools.soak.serve_policy", description=__doc__.splitlines()[0])
    p.add_argument("--domain", required=True)
    p.add_argument("--split", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--faults", default=None)
    ns = p.parse_args(argv)

    from slime_tau_plugin.engine.chat.templates import load_tokenizer
    from slime_tau_plugin.tools.faults.spec import injector_for
    from slime_tau_plugin.tools.servers import build_sglang_server

    server = build_sglang_server(
        "oracle",
        load_tokenizer(ns.tokenizer),
        task_sets=[("tau2", ns.domain, ns.split)],
        port=ns.port,
        latency_s=ns.latency_ms / 1000.0,
        faults=injector_for("policy", ns.faults, source="--faults"),
    )
    for log in (server.requests, server.request_headers, server.completion_requests):
        log.limit = KEPT_REQUESTS
    server.start()
    print(f"serving the oracle policy for tau2/{ns.domain}/{ns.split} at {server.url}", flush=True)
    server.serve_until_interrupted()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
