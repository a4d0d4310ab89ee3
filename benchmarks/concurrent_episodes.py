"""Many concurrent episodes against slow servers: wall time vs the longest episode, and plugin CPU per episode.

The policy (``slime-tau serve --policy echo``) and an LLM user with fixed latency
(``user_server.ChatUserServer``) run in their own processes, so this process's CPU time is the plugin's
own work (templates, parsing, HTTP client, τ environment, reward), as in slime's rollout process.
Each episode: 3 policy turns and 4 user calls (opening, two answers, stop).

    python benchmarks/concurrent_episodes.py [--episodes 256] [--user-latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from slime_tau_plugin.adapters.slime.generate import play_sample  # noqa: E402
from slime_tau_plugin.engine.config import TauConfig  # noqa: E402
from slime_tau_plugin.engine.data import task_row  # noqa: E402
from slime_tau_plugin.engine.envs import get_backend  # noqa: E402
from slime_tau_plugin.engine.loop_http import aclose_all  # noqa: E402
from slime_tau_plugin.engine.templates import default_tokenizer_dir  # noqa: E402
from slime_tau_plugin.tools.cli.runner import RolloutSample  # noqa: E402

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


async def _episodes(config: TauConfig, n: int) -> tuple[float, float, list[float]]:
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

    wall0, cpu0 = time.perf_counter(), time.process_time()
    durations = await asyncio.gather(*[timed(s) for s in samples])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    await aclose_all()
    return wall, cpu, durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--user-latency-ms", type=float, default=200.0)
    parser.add_argument("--tokenizer", default=None)
    ns = parser.parse_args()
    tokenizer = ns.tokenizer or default_tokenizer_dir()
    policy_port, user_port = _free_port(), _free_port()
    policy = subprocess.Popen(
        [sys.executable, "-m", "slime_tau_plugin.tools.cli", "serve", "--policy", "echo", "--tokenizer", tokenizer]
        + ["--port", str(policy_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    user = subprocess.Popen(
        [sys.executable, "-c", USER_SERVER, str(ns.user_latency_ms / 1000), str(user_port)], stdout=subprocess.PIPE
    )
    try:
        user.stdout.readline()
        _wait_ready(f"http://127.0.0.1:{policy_port}")
        config = TauConfig(
            tokenizer_path=tokenizer,
            policy_url=f"http://127.0.0.1:{policy_port}",
            user="llm",
            user_base_url=f"http://127.0.0.1:{user_port}/v1",
            user_model="scripted-user",
            user_timeout_s=120.0,
        )
        asyncio.run(_episodes(config, 4))  # start-up (agent, template, τ domain) off the clock
        print("| episodes at once | wall s | longest episode s | sum of episodes s | sum / wall | CPU ms/episode |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in ns.episodes:
            wall, cpu, durations = asyncio.run(_episodes(config, n))
            print(
                f"| {n} | {wall:.2f} | {max(durations):.2f} | {sum(durations):.1f} | {sum(durations) / wall:.0f}x | "
                f"{1000 * cpu / n:.1f} |"
            )
    finally:
        policy.kill()
        user.kill()


if __name__ == "__main__":
    main()
