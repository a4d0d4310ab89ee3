"""Plugin CPU time per model turn: our incremental bookkeeping vs re-rendering the whole conversation.

Replays recorded oracle trajectories (real τ² retail tasks, real chat template) turn by turn and times,
per turn: (a) ours: decode the model's ids, parse the tool call with SGLang's parser, compute the
continuation ids from the template and append to the Trajectory; (b) naive: re-render and re-tokenize
the full conversation with ``apply_chat_template`` (what a text-in/text-out loop does every turn).

    python benchmarks/turn_overhead.py [--tokenizer DIR] [--tasks 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from slime_tau_plugin.engine.chat.templates import ChatTemplate, default_tokenizer_dir, load_tokenizer
from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.tools.cli.play.runner import Episode, play
from slime_tau_plugin.tools.servers.fake_models import OracleModel
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer


def record(tokenizer_dir: str, n_tasks: int):
    backend = get_backend("tau2")
    refs = backend.task_refs("retail", "train")[:n_tasks]
    tokenizer = load_tokenizer(tokenizer_dir)
    with SGLangServer(OracleModel(tokenizer, [backend.script(r) for r in refs])) as server:
        config = TauConfig(tokenizer_path=tokenizer_dir, policy_url=server.url, record_messages=True)
        episodes = [Episode(i, ref, 0) for i, ref in enumerate(refs)]
        batch = asyncio.run(play(config, episodes, concurrency=8, sampling_params={"max_new_tokens": 2048}))
        return tokenizer, batch.samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--tasks", type=int, default=10)
    ns = ap.parse_args()
    tokenizer, samples = record(ns.tokenizer or default_tokenizer_dir(), ns.tasks)
    ours_ms, naive_ms = [], []
    for s in samples:
        messages, tools = s.metadata["messages"], s.metadata["tools"]
        template, parser = ChatTemplate(tokenizer, tools), ToolCallParser(tools)
        prompt_len = len(s.tokens) - s.response_length
        traj = Trajectory(s.tokens[:prompt_len])
        model_ids = [template.encode(m["content"]) + template.eot_ids for m in messages if m["role"] == "assistant"]
        later = messages[2:]
        for turn, ids in enumerate(model_ids):
            position = [i for i, m in enumerate(later) if m["role"] == "assistant"][turn]
            following = []
            for m in later[position + 1 :]:
                if m["role"] == "assistant":
                    break
                following.append(m)
            t0 = time.perf_counter()
            traj.add_model_turn(ids, [0.0] * len(ids))
            parser.parse(template.decode(ids))
            if following:
                traj.add_continuation(template.continuation_ids(following) or [])
            ours_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            full = messages[: 2 + position + 1 + len(following)]
            tokenizer.encode(
                tokenizer.apply_chat_template(full, tools=tools, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False,
            )
            naive_ms.append((time.perf_counter() - t0) * 1000)
    rows = [("ours (incremental)", ours_ms), ("naive (re-render all)", naive_ms)]
    print(f"{len(ours_ms)} turns over {len(samples)} τ² retail episodes")
    print(f"{'per turn':24} {'mean ms':>9} {'p50 ms':>9} {'p95 ms':>9}")
    for name, xs in rows:
        p95 = sorted(xs)[int(0.95 * (len(xs) - 1))]
        print(f"{name:24} {statistics.mean(xs):9.3f} {statistics.median(xs):9.3f} {p95:9.3f}")
    print(f"ratio naive/ours (mean): {statistics.mean(naive_ms) / statistics.mean(ours_ms):.1f}x")


if __name__ == "__main__":
    main()
