"""``slime-tau serve-user``: the scripted OpenAI-compatible user simulator as a server of its own (no LLM).

It serves ``servers/chat_user_server.ChatUserServer`` (``/v1/chat/completions``, ``/v1/models``,
``/faults``), so ``--user llm`` runs, tests and ``slime-tau soak`` can point ``tau_user_base_url`` at
``http://HOST:PORT/v1`` and kill the process to play a real user-simulator outage. The server keeps only
the last :data:`KEPT_REQUESTS` request bodies (tests read them; a long run must not hold every one).
"""

from __future__ import annotations

import argparse

from slime_tau_plugin.tools.cli.args import non_negative_float, non_negative_int, port_number

KEPT_REQUESTS = 256
FAULT_SET_CHOICES = ("templated", "paraphrased", "freeform", "roleplay", "slips")
"""``servers/chat_user_server.FAULT_SETS``, spelled here so the CLI does not import the server to build its help."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve-user",
        help="run the scripted OpenAI-compatible user-simulator server (no LLM)",
        description="A scripted customer behind an OpenAI-compatible /v1/chat/completions, for --user llm without "
        "an LLM: rollout --user llm --user-base-url http://HOST:PORT/v1 --user-model scripted-user (the model name "
        "it lists at /v1/models).",
    )
    d = "(default: %(default)s)"
    p.add_argument("--host", default="127.0.0.1", help=f"address to bind; 0.0.0.0 for other hosts {d}")
    p.add_argument("--port", type=port_number, default=30001, help=f"port to listen on {d}")
    p.add_argument("--latency-ms", type=non_negative_float, default=0.0, help=f"added to each answer {d}")
    p.add_argument(
        "--max-replies",
        type=non_negative_int,
        default=0,
        help=f"confirmations the customer sends before ###STOP### {d}",
    )
    p.add_argument(
        "--faults",
        default=None,
        help="inject faults, e.g. 'http_503:0.05,empty_reply:0.01,invented_id:0.1' ([target.]kind[=param]:rate[@cap]; "
        "user kinds apply, a wrong customer's too: invented_id, pasted_instructions, as_agent, loop, early_stop; "
        "TAU_FAULTS_SEED seeds them; GET /faults counts them) (default: $TAU_FAULTS, else none)",
    )
    p.add_argument(
        "--faults-set",
        choices=FAULT_SET_CHOICES,
        default="templated",
        help="which wrong customer --faults plays: templated (one sentence per kind), paraphrased (invented_id: "
        "invented facts of many shapes, as_agent: the service's speech acts, early_stop: stops and transfer "
        "requests), freeform, the held-out set written blind to the review's checks (the same kinds inside "
        "natural replies: facts in many written forms per τ domain, agent acts whole or mid-message, seven stop "
        "shapes, on telecom in place of a device action) or roleplay, a second blind set for the final measurement "
        "(as_agent: the service's speech acts as a role-flipped customer writes them; invented_id and early_stop: "
        "a few shapes each) or slips, a third blind set that plays only as_agent (a customer drifting into the "
        "assistant persona, decided per conversation; invented_id and early_stop do nothing); paraphrased, freeform, "
        f"roleplay and slips log each fault at GET /faults/log {d}",
    )


def run(ns: argparse.Namespace) -> int:
    from slime_tau_plugin.tools.faults.spec import injector_for
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

    faults = injector_for("user", ns.faults, source="--faults")
    server = ChatUserServer(
        max_replies=ns.max_replies,
        latency_s=ns.latency_ms / 1000.0,
        host=ns.host,
        port=ns.port,
        faults=faults,
        faults_set=ns.faults_set,
    )
    server.requests.limit = server.request_headers.limit = KEPT_REQUESTS
    server.start()
    print(f"serving the scripted user simulator at {server.base_url}", flush=True)
    print("Ctrl-C to stop", flush=True)
    server.serve_until_interrupted()
    return 0
