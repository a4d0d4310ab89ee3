"""Many concurrent episodes against slow servers: wall time vs the longest episode, plugin CPU per episode, and
how the event loop holds up.

The policy (``slime-tau serve --policy echo``) and an LLM user with fixed latency
(``user_server.ChatUserServer``) run in their own processes, so this process's CPU time is the plugin's
own work (templates, parsing, HTTP client, τ environment, reward), as in slime's rollout process.
Each episode: 3 policy turns and 4 user calls (opening, two answers, stop). A monitor task on the same loop
sleeps 10 ms at a time and records how late it wakes (the loop's stalls) and the loop thread's CPU time over
the wall time (its busy share), as slime's rollout loop would see them.

    python benchmarks/concurrent_episodes.py [--episodes 256] [--user-latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from slime_tau_plugin.adapters.slime.generate import play_sample  # noqa: E402
from slime_tau_plugin.engine.chat.templates import default_tokenizer_dir  # noqa: E402
from slime_tau_plugin.engine.config.tau_config import TauConfig  # noqa: E402
from slime_tau_plugin.engine.data import task_row  # noqa: E402
from slime_tau_plugin.engine.envs import get_backend  # noqa: E402
from slime_tau_plugin.engine.net.loop_http import aclose_all  # noqa: E402
from slime_tau_plugin.tools.cli.play.runner import RolloutSample  # noqa: E402

USER_SERVER = """
import sys, time
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
ChatUserServer(latency_s=float(sys.argv[1]), max_replies=2, port=int(sys.argv[2])).start()
print("ready", flush=True)
time.sleep(10**6)
"""
SAMPLING = {"temperature": 1.0, "max_new_tokens": 256, "no_stop_trim": True, "skip_special_tokens": False}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str) -> None:
    import urllib.request

    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


class CallbackClock:
    """The loop thread's CPU time in each callback (``asyncio.Handle._run``, patched for the run): the longest
    one is the longest the loop's own work held it, whatever other processes on a loaded box take meanwhile."""

    def __init__(self) -> None:
        self.worst_s = 0.0
        self._original = asyncio.events.Handle._run

    def __enter__(self) -> CallbackClock:
        original, clock = self._original, self
        self.gc_worst_s, self._gc_t0 = 0.0, 0.0
        gc.callbacks.append(self._gc)

        def timed_run(handle: asyncio.Handle) -> None:
            t0 = time.thread_time()
            try:
                original(handle)
            finally:
                clock.worst_s = max(clock.worst_s, time.thread_time() - t0)

        asyncio.events.Handle._run = timed_run
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._original
        gc.callbacks.remove(self._gc)

    def _gc(self, phase: str, info: dict) -> None:
        """The longest garbage collection (a pause in whichever callback allocated)."""
        if phase == "start":
            self._gc_t0 = time.thread_time()
        else:
            self.gc_worst_s = max(self.gc_worst_s, time.thread_time() - self._gc_t0)


class LoopMonitor:
    """A 10 ms sleeper on the running loop: its lateness is the longest time something held the loop."""

    def __init__(self, tick_s: float = 0.01) -> None:
        self.tick_s = tick_s
        self.lateness: list[float] = []
        self.own: list[float] = []
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._wall0, self._cpu0 = time.perf_counter(), time.thread_time()  # called on the loop's thread
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> tuple[float, float, float, float]:
        """Worst and 99th-percentile lateness (ms), the worst lateness this process's own CPU work can account
        for (ms), and the loop thread's busy share (CPU / wall)."""
        busy = (time.thread_time() - self._cpu0) / (time.perf_counter() - self._wall0)
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        late = sorted(self.lateness) or [0.0]
        own = max(self.own, default=0.0)
        return 1000 * late[-1], 1000 * late[int(0.99 * (len(late) - 1))], 1000 * own, busy

    async def _watch(self) -> None:
        """Each tick's lateness, and the part of it this process's CPU time covers (all its threads: a worker
        holding the GIL stalls the loop; another process taking the core on a loaded box does not count)."""
        while True:
            before, cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(self.tick_s)
            late = max(0.0, time.perf_counter() - before - self.tick_s)
            self.lateness.append(late)
            self.own.append(min(late, time.process_time() - cpu))


async def _episodes(config: TauConfig, n: int) -> tuple[float, float, list[float], tuple[float, float, float]]:
    refs = get_backend("tau2").task_refs("retail", "train")
    samples = []
    for i in range(n):
        row = task_row(i, refs[i % len(refs)])
        samples.append(RolloutSample(prompt=row["index"], metadata=row["metadata"], session_id=f"bench-{i}"))

    async def timed(sample: RolloutSample) -> float:
        t0 = time.perf_counter()
        await play_sample(config, sample, SAMPLING)
        assert sample.status is RolloutSample.Status.COMPLETED, sample.metadata.get("error")
        return time.perf_counter() - t0

    monitor = LoopMonitor()
    monitor.start()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with CallbackClock() as callbacks:
        durations = await asyncio.gather(*[timed(s) for s in samples])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    worst, p99, _, busy = await monitor.stop()
    loop = (worst, p99, 1000 * callbacks.worst_s, 1000 * callbacks.gc_worst_s, busy)
    await aclose_all()
    return wall, cpu, durations, loop


def start_servers(tokenizer: str, policy_latency_ms: float, user_latency_ms: float) -> tuple[Any, Any, TauConfig]:
    """The echo policy and the LLM user, each in its own process, and a config that plays against them."""
    policy_port, user_port = _free_port(), _free_port()
    policy = subprocess.Popen(
        [sys.executable, "-m", "slime_tau_plugin.tools.cli", "serve", "--policy", "echo", "--tokenizer", tokenizer]
        + ["--port", str(policy_port), "--latency-ms", str(policy_latency_ms)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    user = subprocess.Popen(
        [sys.executable, "-c", USER_SERVER, str(user_latency_ms / 1000), str(user_port)], stdout=subprocess.PIPE
    )
    user.stdout.readline()
    _wait_ready(f"http://127.0.0.1:{policy_port}")
    config = TauConfig(
        tokenizer_path=tokenizer,
        policy_url=f"http://127.0.0.1:{policy_port}",
        user="llm",
        user_base_url=f"http://127.0.0.1:{user_port}/v1",
        user_model="scripted-user",
        user_timeout_s=300.0,
        policy_timeout_s=300.0,
    )
    return policy, user, config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--user-latency-ms", type=float, default=200.0)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after the start-up episodes")
    ns = parser.parse_args()
    tokenizer = ns.tokenizer or default_tokenizer_dir()
    policy, user, config = start_servers(tokenizer, 0.0, ns.user_latency_ms)
    try:
        asyncio.run(_episodes(config, 4))  # start-up (agent, template, τ domain) off the clock
        if ns.gc_freeze:
            gc.freeze()
        print(
            "| episodes at once | wall s | longest episode s | sum of episodes s | sum / wall | CPU ms/episode "
            "| worst loop stall ms | p99 stall ms | longest callback, loop CPU ms | longest GC ms | loop busy |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in ns.episodes:
            wall, cpu, durations, (worst, p99, callback, gc_ms, busy) = asyncio.run(_episodes(config, n))
            print(
                f"| {n} | {wall:.2f} | {max(durations):.2f} | {sum(durations):.1f} | {sum(durations) / wall:.0f}x | "
                f"{1000 * cpu / n:.1f} | {worst:.0f} | {p99:.0f} | {callback:.0f} | {gc_ms:.0f} | {100 * busy:.0f}% |"
            )
    finally:
        policy.kill()
        user.kill()


if __name__ == "__main__":
    main()
