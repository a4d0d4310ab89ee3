"""What the simulated customer, and the review of it, cost per episode (issue 33 §5).

Plays every task of one τ set with the built-in oracle policy (``slime-tau serve``) against our built-in LLM-customer
server (``slime-tau serve-user``, standing in for a real user model), once per row, through the engine's one episode
boundary (``engine/loop/boundary.play_episode``), and reads each episode's ``CustomerCost`` (what the engine itself
counts and reports as ``tau_user/cost_*``). The customer server's own request count (``GET /requests``) is checked
against the counted requests on every row. The review judge is a chat server in this process that answers τ²'s
review JSON with no finding (``--judge-latency-ms`` stands in for a real judge model's latency).

Rows (each on top of ``tau_user=llm`` on serve-user, plus every ``--set``):

- ``review off``: ``tau_review=false``, the baseline of the ratios;
- ``checks``: the deterministic checks (the default);
- ``checks + judge``: ``tau_review_judge_share=1`` (every episode judged);
- ``--row 'LABEL:tau_key=value,tau_key=value'``: any other row, e.g. §4's shared opening or request cache
  (benchmarks/user_cost.md lists the commands).

    PYTHONPATH=$PWD python benchmarks/user_cost.py [--split test] [--user-latency-ms 300] [--judge-latency-ms 1000]
        [--set tau_key=value ...] [--row 'LABEL:tau_key=value,...' ...] [--no-default-rows]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.chat.template_text import default_tokenizer_dir
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.episode.request import EpisodeOptions, EpisodeRequest
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 2048, "no_stop_trim": True}
DEFAULT_ROWS = (
    ("review off", {"tau_review": "false"}),
    ("checks", {}),
    ("checks + judge", {"tau_review_judge_share": "1"}),
)
BASELINE = "review off"


@dataclass(slots=True)
class Row:
    """One row's episodes over every round."""

    label: str
    config: TauConfig
    results: list[EpisodeResult] = field(default_factory=list)
    wall_s: float = 0.0
    """The row's runs' wall time, summed over rounds."""
    served: int = 0
    """Requests the customer server saw during the row's runs (``GET /requests``)."""
    judged: int = 0
    """Requests the judge server saw."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], url: str) -> subprocess.Popen:
    """A server subprocess, once ``url`` answers (a loaded box starts it slowly)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    deadline = time.monotonic() + 300
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                sys.exit(f"{' '.join(cmd)} did not come up")
            time.sleep(0.3)


def served(base: str) -> int:
    return int(json.loads(urllib.request.urlopen(f"{base}/requests", timeout=5).read())["total"])


def clean_judge(messages: list[dict], tools: list[dict] | None) -> dict:
    return {"role": "assistant", "content": json.dumps({"errors": [], "summary": "the customer followed its script"})}


def parse_keys(pairs: list[str]) -> dict[str, str]:
    """``tau_key=value`` pairs (``tau_`` optional) as ``{tau_key: value}``; a malformed one exits with one line."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            sys.exit(f"--set/--row: {pair!r} is not tau_key=value")
        key = key.strip()
        out[key if key.startswith("tau_") else f"tau_{key}"] = value.strip()
    return out


def config_of(keys: dict[str, str]) -> TauConfig:
    """A ``TauConfig`` from ``tau_*`` keys (values as text: the config coerces or refuses them, naming the key)."""
    return TauConfig(**{key.removeprefix("tau_"): value for key, value in keys.items()})


@dataclass(frozen=True, slots=True)
class Plan:
    """How a row's run plays its tasks."""

    concurrency: int
    samples_per_task: int = 1
    """Samples of each task, one GRPO group (their group id reaches the engine where it takes one)."""
    seeded: bool = True
    """A distinct ``sampling_seed`` per episode (the LLM customer's request seed); False: no seed is sent."""


async def play_row(
    config: TauConfig, refs: list, plan: Plan, tag: str, round_: int
) -> tuple[list[EpisodeResult], float]:
    gate = asyncio.Semaphore(plan.concurrency)

    async def one(i: int, j: int, ref: Any) -> EpisodeResult:
        async with gate:
            seed = 1_000_000 * round_ + 1000 * i + j  # distinct per round, task and sample
            sampling = {**SAMPLING, **({"sampling_seed": seed} if plan.seeded else {})}
            options = EpisodeOptions(session_id=f"{tag}-{i}-{j}", group=f"{tag}-t{i}")
            request = EpisodeRequest(f"{tag}-{i}-{j}", None, {}, sampling, options)
            played = await play_episode(config, request, task=lambda: ref)
            return played.result

    t0 = time.perf_counter()
    jobs = [one(i, j, ref) for i, ref in enumerate(refs) for j in range(plan.samples_per_task)]
    results = await asyncio.gather(*jobs)
    return list(results), time.perf_counter() - t0


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def table(rows: list[Row]) -> list[str]:
    base = next((r for r in rows if r.label == BASELINE), rows[0])
    base_wall = mean([r.cost.wall_s for r in base.results])
    lines = [
        "| row | episodes | passed | customer requests/ep (failed) | servers saw | customer tokens in/out per ep "
        "| customer wait share | judge requests/ep | judge tokens/ep | judge wait share | checks CPU ms/ep "
        "| episode wall s | wall vs baseline | run wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        costs = [r.cost for r in row.results]
        wall = sum(c.wall_s for c in costs)
        requests = sum(c.user.requests for c in costs)
        n = len(costs)
        lines.append(
            f"| {row.label} | {n} | {sum(r.reward >= 1.0 - 1e-6 for r in row.results)} "
            f"| {requests / n:.2f} ({sum(c.user.failed for c in costs) / n:.2f}) "
            f"| {row.served}{'' if row.served == requests else ' (MISMATCH)'}, judge {row.judged} "
            f"| {mean([c.user.prompt_tokens for c in costs]):.0f} / "
            f"{mean([c.user.completion_tokens for c in costs]):.1f} "
            f"| {sum(c.user.wait_s for c in costs) / wall:.3f} "
            f"| {sum(c.judge.requests for c in costs) / n:.2f} "
            f"| {mean([c.judge.prompt_tokens + c.judge.completion_tokens for c in costs]):.0f} "
            f"| {sum(c.judge.wait_s for c in costs) / wall:.3f} "
            f"| {1000 * mean([c.review_cpu_s for c in costs]):.2f} "
            f"| {wall / n:.3f} | {wall / n / base_wall:.3f} | {row.wall_s:.1f} |"
        )
    return lines + ["", *ratios(rows, base)]


def ratios(rows: list[Row], base: Row) -> list[str]:
    """Each row against the baseline: all requests and tokens (customer + judge), wall, and the checks' CPU share."""

    def per_episode(row: Row) -> tuple[float, float, float, float]:
        costs = [r.cost for r in row.results]
        n = len(costs)
        requests = sum(c.user.requests + c.judge.requests for c in costs) / n
        tokens = sum(c.user.prompt_tokens + c.user.completion_tokens + c.judge.prompt_tokens
                     + c.judge.completion_tokens for c in costs) / n  # fmt: skip
        wall = sum(c.wall_s for c in costs) / n
        return requests, tokens, wall, sum(c.review_cpu_s for c in costs) / n

    b = per_episode(base)
    lines = [
        f"| row | requests/ep (customer + judge) | x {base.label} | tokens/ep | x {base.label} | episode wall s "
        f"| x {base.label} | checks CPU / episode wall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        requests, tokens, wall, cpu = per_episode(row)
        lines.append(
            f"| {row.label} | {requests:.2f} | {requests / b[0]:.3f} | {tokens:.0f} | {tokens / b[1]:.3f} "
            f"| {wall:.3f} | {wall / b[2]:.3f} | {cpu / wall:.1e} |"
        )
    return lines


def machine() -> str:
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if "model name" in line), platform.processor())
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, {platform.system()}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--benchmark", default="tau2")
    p.add_argument("--domain", default="retail")
    p.add_argument("--split", default="test")
    p.add_argument("--tasks", type=int, default=None, help="the first N tasks (default: all)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3, help="each row this many times, rows interleaved")
    p.add_argument("--samples-per-task", type=int, default=1, help="one GRPO group of this many per task")
    p.add_argument("--no-seed", action="store_true", help="send the customer no per-episode seed")
    p.add_argument("--max-replies", type=int, default=2, help="serve-user's confirmations before it stops")
    p.add_argument("--user-latency-ms", type=float, default=0.0, help="serve-user's added latency per answer")
    p.add_argument("--judge-latency-ms", type=float, default=0.0, help="the judge's added latency per answer")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="every row")
    p.add_argument("--row", dest="rows", action="append", default=[], metavar="LABEL:KEY=VALUE,...")
    p.add_argument("--no-default-rows", action="store_true", help="only the --row rows (and the baseline)")
    ns = p.parse_args()

    refs = get_backend(ns.benchmark).task_refs(ns.domain, ns.split)[: ns.tasks]
    policy_port, user_port, judge_port = free_port(), free_port(), free_port()
    user_base = f"http://127.0.0.1:{user_port}"
    common = {
        "tau_benchmark": ns.benchmark,
        "tau_domain": ns.domain,
        "tau_policy_url": f"http://127.0.0.1:{policy_port}",
        "tau_tokenizer_path": default_tokenizer_dir(),
        "tau_max_turns": "15",
        "tau_user": "llm",
        "tau_user_base_url": f"{user_base}/v1",
        "tau_user_model": "scripted-user",
        "tau_judge_base_url": f"http://127.0.0.1:{judge_port}/v1",
        "tau_judge_model": "judge",
        **parse_keys(ns.sets),
    }
    wanted = [DEFAULT_ROWS[0]] + ([] if ns.no_default_rows else list(DEFAULT_ROWS[1:]))
    for spec in ns.rows:
        label, _, pairs = spec.partition(":")
        wanted.append((label.strip(), parse_keys([x for x in pairs.split(",") if x.strip()])))
    try:  # every row's keys are checked before a server starts
        rows = [Row(label, config_of({**common, **keys})) for label, keys in wanted]
    except ConfigError as exc:
        sys.exit(f"user_cost.py: {exc}")
    plan = Plan(ns.concurrency, ns.samples_per_task, not ns.no_seed)
    policy_cmd = ["slime-tau", "serve", "--port", str(policy_port), "--benchmark", ns.benchmark]
    policy_cmd += ["--domain", ns.domain, "--split", ns.split]
    user_cmd = ["slime-tau", "serve-user", "--port", str(user_port), "--max-replies", str(ns.max_replies)]
    user_cmd += ["--latency-ms", str(ns.user_latency_ms)]
    policy = start(policy_cmd, f"http://127.0.0.1:{policy_port}/health")
    user = start(user_cmd, f"{user_base}/v1/models")
    judge = ChatUserServer(reply=clean_judge, latency_s=ns.judge_latency_ms / 1000.0, port=judge_port).start()
    try:
        for row in rows:  # warm-up, not counted: each config builds its resources (tokenizer, template probe)
            asyncio.run(play_row(row.config, refs[: ns.concurrency], Plan(ns.concurrency), "warmup", -1))
        for round_ in range(ns.rounds):
            for row in rows:
                before, judged = served(user_base), judge.requests.total
                tag = f"{row.label.replace(' ', '_')}-r{round_}"
                results, wall = asyncio.run(play_row(row.config, refs, plan, tag, round_))
                row.results += results
                row.wall_s += wall
                row.served += served(user_base) - before
                row.judged += judge.requests.total - judged
            print(f"done round {round_ + 1}/{ns.rounds}", file=sys.stderr)
    finally:
        judge.stop()
        for proc in (user, policy):
            proc.terminate()
            proc.wait(10)
    print(
        f"{ns.benchmark}/{ns.domain} {ns.split}: {len(refs)} tasks x {ns.samples_per_task} samples x {ns.rounds} "
        f"rounds ({'no seed' if ns.no_seed else 'a seed per episode'}), concurrency "
        f"{ns.concurrency}, serve-user latency {ns.user_latency_ms:g} ms, judge latency {ns.judge_latency_ms:g} ms; "
        f"{machine()}"
    )
    print()
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
