"""``slime-tau serve``: the SGLang-protocol CPU server playing a fake model (no GPU)."""

from __future__ import annotations

import argparse

from ..servers import FAKE_MODELS
from .args import add_task_args


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the SGLang-protocol CPU policy server")
    add_task_args(p)
    p.add_argument("--policy", default="oracle", choices=list(FAKE_MODELS), help="the fake model the server plays")
    p.add_argument("--script", default=None, help="scripted policy: JSON list of replies, one per assistant turn")
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--context-len", type=int, default=32768)
    p.add_argument("--tool-call-format", default="qwen25")


def run(ns: argparse.Namespace) -> int:
    from ..servers import build_sglang_server
    from ..templates import default_tokenizer_dir, load_tokenizer

    tokenizer = load_tokenizer(ns.tokenizer or default_tokenizer_dir())
    server = build_sglang_server(
        ns.policy,
        tokenizer,
        task_sets=[(ns.benchmark, ns.domain, ns.split)],
        script=ns.script,
        context_len=ns.context_len,
        tool_call_format=ns.tool_call_format,
        host=ns.host,
        port=ns.port,
        latency_s=ns.latency_ms / 1000.0,
    )
    print(f"serving policy={ns.policy} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
