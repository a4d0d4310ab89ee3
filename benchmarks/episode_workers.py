"""Throughput and slime's loop with episodes in this process, in worker processes and in local Ray actors.

The policy (``slime-tau serve --policy echo --latency-ms 100``) and an LLM user answering in 200 ms run in
their own processes. Each episode: 3 policy turns and 4 user replies, so its latency-bound time is
3 x 100 + 4 x 200 = 1.1 s, and N episodes at once ideally take 1.1 s. For each mode and N: wall time, episodes/s,
the share of the ideal reached, CPU of slime's event-loop thread per episode and its share of the wall time
(busy share), the loop's worst stall (a 10 ms ticker's lateness), and resident memory per in-flight episode
(peak RSS of the processes playing episodes over their RSS before the batch, divided by N), and the CPU of every
process of the run (this one, the workers, both servers) per episode: divided by the cores, the shortest wall time
the machine allows (CPU-bound wall).

    python benchmarks/episode_workers.py [--episodes 256 1024] [--modes inproc proc1 proc2 ray2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, os.path.dirname(__file__))

from concurrent_episodes import start_servers  # noqa: E402

from slime_tau_plugin.adapters.slime.generate import play_sample  # noqa: E402
from slime_tau_plugin.engine.chat.templates import default_tokenizer_dir  # noqa: E402
from slime_tau_plugin.engine.config.tau_config import TauConfig  # noqa: E402
from slime_tau_plugin.engine.data import task_row  # noqa: E402
from slime_tau_plugin.engine.envs import get_backend  # noqa: E402
from slime_tau_plugin.engine.net.loop_http import aclose_all  # noqa: E402
from slime_tau_plugin.engine.workers.registry import close_pools, pool_for  # noqa: E402
from slime_tau_plugin.tools.cli.play.runner import RolloutSample  # noqa: E402
from slime_tau_plugin.tools.soak.monitor import rss_mb  # noqa: E402

SAMPLING = {"temperature": 1.0, "max_new_tokens": 256, "no_stop_trim": True, "skip_special_tokens": False}
IDEAL_S = 3 * 0.1 + 4 * 0.2
MODES = {"inproc": (0, "process"), "proc1": (1, "process"), "proc2": (2, "process"), "ray2": (2, "ray")}


@dataclass
class Row:
    mode: str
    n: int
    wall: float
    loop_cpu: float
    worst_stall: float
    mem_per_episode_kb: float
    all_cpu: float
    """CPU seconds of every process of the run: this one, the workers, the policy and the user servers."""


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (``/proc/<pid>/stat``)."""
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def _batch(config: TauConfig, n: int, tag: str, pids: list[int], servers: list[int] = ()) -> Row:
    refs = get_backend("tau2").task_refs("retail", "train")
    rows = [task_row(i, refs[i % len(refs)]) for i in range(n)]
    samples = [
        RolloutSample(prompt=row["index"], metadata=row["metadata"], session_id=f"{tag}-{i}")
        for i, row in enumerate(rows)
    ]
    base = sum(rss_mb(p) or 0.0 for p in pids)
    peak, worst = base, 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal peak, worst
        while not done.is_set():
            before = time.monotonic()
            await asyncio.sleep(0.01)
            worst = max(worst, time.monotonic() - before - 0.01)
            peak = max(peak, sum(rss_mb(p) or 0.0 for p in pids)) if n and int(before * 10) % 2 == 0 else peak

    watch = asyncio.create_task(ticker())
    everyone = sorted({os.getpid(), *pids, *servers})
    wall0, cpu0, all0 = time.perf_counter(), time.thread_time(), cpu_s(everyone)
    await asyncio.gather(*[play_sample(config, s, SAMPLING) for s in samples])
    wall, cpu, all_cpu = time.perf_counter() - wall0, time.thread_time() - cpu0, cpu_s(everyone) - all0
    done.set()
    await watch
    bad = [s.metadata.get("error") for s in samples if s.status is not RolloutSample.Status.COMPLETED]
    if bad:
        raise SystemExit(f"{len(bad)} episodes did not complete: {bad[0]}")
    await aclose_all()
    return Row(tag, n, wall, cpu, worst, 1024 * (peak - base) / n, all_cpu)


async def _run_mode(mode: str, base: TauConfig, sizes: list[int], servers: list[int]) -> list[Row]:
    workers, kind = MODES[mode]
    config = TauConfig(
        **{**base.model_dump(), "episode_workers": workers, "episode_worker_kind": kind, "episode_worker_cpus": 0.5}
    )
    pool = await pool_for(config)
    await _batch(config, 8, f"{mode}-warm", [])  # start-up (workers, resources, τ domain) off the clock
    if pool is None:
        pids = [os.getpid()]
    elif kind == "process":
        pids = [slot.process.pid for slot in pool.slots]
    else:
        pids = []
        for slot in pool.slots:
            where = (await slot.actor.warm.remote())["tau_worker"]
            pids.append(int(where.split(" pid ")[1].split()[0]))
    rows = [await _batch(config, n, mode, pids, servers) for n in sizes]
    close_pools()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--tokenizer", default=None)
    ns = parser.parse_args()
    tokenizer = ns.tokenizer or default_tokenizer_dir()
    policy, user, base = start_servers(tokenizer, 100.0, 200.0)
    if "ray2" in ns.modes:
        import ray

        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
    try:
        rows = [
            row for mode in ns.modes for row in asyncio.run(_run_mode(mode, base, ns.episodes, [policy.pid, user.pid]))
        ]
        inproc = {r.n: r.wall for r in rows if r.mode == "inproc"}
        print(
            "| mode | episodes at once | wall s | episodes/s | share of ideal | vs in-process | loop CPU ms/episode "
            "| loop busy share | worst loop stall ms | memory KB/episode | all CPU ms/episode | CPU-bound wall s |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            speedup = f"{inproc[r.n] / r.wall:.2f}x" if r.n in inproc else "-"
            print(
                f"| {r.mode} | {r.n} | {r.wall:.2f} | {r.n / r.wall:.0f} | {IDEAL_S / r.wall:.0%} | {speedup} | "
                f"{1000 * r.loop_cpu / r.n:.2f} | {r.loop_cpu / r.wall:.0%} | {1000 * r.worst_stall:.0f} | "
                f"{r.mem_per_episode_kb:.0f} | {1000 * r.all_cpu / r.n:.1f} | {r.all_cpu / os.cpu_count():.2f} |"
            )
    finally:
        policy.kill()
        user.kill()


if __name__ == "__main__":
    main()
