"""Plugin CPU per model turn against the turn number (1..50): ours, the naive re-render, and the tokenization floor.

A 50-turn τ² retail conversation is built from recorded oracle episodes (real tool outputs, user messages and
model tool calls, cycled) and replayed turn by turn with a real chat template. Per turn, in process CPU time
(``time.process_time``: every thread, so the Rust tokenizer's own threads count):

- floor: tokenizing the new tool/user contents alone (the Rust tokenizer's ``encode_batch_fast``; HF's
  ``encode`` shown too);
- plugin-only: what the engine does each turn: append the model's ids, decode, parse the tool call (SGLang's
  parser), the continuation ids (render + tokenize), append them, build the next request's ``input_ids``;
- all-in: plugin-only + the request body (orjson of the held ids) + parsing a ``/generate`` answer;
- naive: ``apply_chat_template`` of the whole conversation + ``encode``, what a text-in loop does each turn.

Each turn is the median of ``--repeats`` replays. Runs on any checkout (only long-standing APIs are used), so
before/after numbers come from the same script:

    PYTHONPATH=. python benchmarks/turn_cpu.py [--tokenizer DIR ...] [--turns 50] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import orjson  # noqa: E402

from slime_tau_plugin.engine.chat.templates import ChatTemplate, default_tokenizer_dir, load_tokenizer  # noqa: E402
from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser  # noqa: E402
from slime_tau_plugin.engine.config.tau_config import TauConfig  # noqa: E402
from slime_tau_plugin.engine.envs import get_backend  # noqa: E402
from slime_tau_plugin.engine.episode.trajectory import Trajectory  # noqa: E402
from slime_tau_plugin.engine.policy.sglang import parse_generate_response  # noqa: E402
from slime_tau_plugin.tools.cli.play.runner import Episode, play  # noqa: E402
from slime_tau_plugin.tools.servers.fake_models import OracleModel  # noqa: E402
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer  # noqa: E402

SHOWN_TURNS = (1, 2, 5, 10, 20, 30, 40, 50)


def record(tokenizer: Any, tokenizer_dir: str, n_tasks: int) -> tuple[list[dict], list[dict], list[tuple]]:
    """Oracle episodes of τ² retail: the opening, the tools, and every (model text, messages that follow) pair."""
    backend = get_backend("tau2")
    refs = backend.task_refs("retail", "train")[:n_tasks]
    with SGLangServer(OracleModel(tokenizer, [backend.script(r) for r in refs])) as server:
        config = TauConfig(tokenizer_path=tokenizer_dir, policy_url=server.url, record_messages=True)
        episodes = [Episode(i, ref, 0) for i, ref in enumerate(refs)]
        batch = asyncio.run(play(config, episodes, concurrency=4, sampling_params={"max_new_tokens": 2048}))
    pairs = []
    for sample in batch.samples:
        later = sample.metadata["messages"][2:]
        for i, message in enumerate(later):
            if message["role"] != "assistant":
                continue
            following = []
            for m in later[i + 1 :]:
                if m["role"] == "assistant":
                    break
                following.append(m)
            if following:
                pairs.append((message["content"], following))
    first = batch.samples[0].metadata
    return first["messages"][:2], first["tools"], pairs


def _cpu(fn) -> tuple[float, Any]:
    t0 = time.process_time()
    out = fn()
    return (time.process_time() - t0) * 1000, out


def replay(tokenizer: Any, opening: list[dict], tools: list[dict], pairs: list[tuple], turns: int) -> dict[str, list]:
    """One pass over ``turns`` turns; per turn the CPU ms of each way."""
    template, parser = ChatTemplate(tokenizer, tools), ToolCallParser(tools)
    backend = tokenizer.backend_tokenizer
    fast = getattr(backend, "encode_batch_fast", backend.encode_batch)
    messages = [dict(m) for m in opening]
    traj = Trajectory(template.prompt_ids(messages))
    out: dict[str, list] = {k: [] for k in ("floor", "floor_hf", "plugin", "all_in", "naive", "held")}
    for turn in range(turns):
        text, following = pairs[turn % len(pairs)]
        model_ids = [*template.encode(text), *template.eot_ids]
        contents = [str(m["content"]) for m in following]
        out["floor"].append(_cpu(lambda c=contents: [fast([x], add_special_tokens=False)[0].ids for x in c])[0])
        out["floor_hf"].append(_cpu(lambda c=contents: [tokenizer.encode(x, add_special_tokens=False) for x in c])[0])
        plugin_ms, ids = _cpu(lambda m=model_ids, f=following: _ours(template, parser, traj, messages, m, f))
        body = json.dumps(_answer(text, model_ids))
        wire_ms, _ = _cpu(lambda i=ids, b=body: _wire(i, b))
        out["plugin"].append(plugin_ms)
        out["all_in"].append(plugin_ms + wire_ms)
        out["naive"].append(_cpu(lambda: _naive(tokenizer, messages, tools))[0])
        out["held"].append(len(traj))
    return out


def _ours(template: Any, parser: Any, traj: Trajectory, messages: list, model_ids: list, following: list) -> list:
    """What the engine does per turn (``runner.py``; the continuation runs in a worker thread there)."""
    traj.add_model_turn(model_ids, [-0.5] * len(model_ids))
    decoded = template.decode(model_ids)
    parser.parse(decoded)
    messages.append({"role": "assistant", "content": decoded})
    continuation = template.continuation_ids(following, messages)
    if continuation is None:
        continuation = template.continuation_ids_unsafe(following, messages)
    traj.add_continuation(continuation)
    messages.extend(following)
    return traj.ids


def _answer(text: str, model_ids: list[int]) -> dict[str, Any]:
    logprobs = [[-0.5, t, None] for t in model_ids]
    return {
        "text": text,
        "output_ids": model_ids,
        "meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": logprobs},
    }


def _wire(ids: list[int], body: str) -> Any:
    """The request body of the next turn and the parse of a ``/generate`` answer (the HTTP client's own CPU)."""
    payload = {"input_ids": ids, "sampling_params": {"max_new_tokens": 512}, "return_logprob": True}
    return orjson.dumps(payload), parse_generate_response(json.loads(body))


def _naive(tokenizer: Any, messages: list, tools: list) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(text, add_special_tokens=False)


def table(name: str, runs: list[dict[str, list]], turns: int) -> str:
    med = {k: [statistics.median(r[k][t] for r in runs) for t in range(turns)] for k in runs[0]}
    lines = [
        f"**{name}**",
        "",
        "| turn | held ids | floor ms (Rust) | floor ms (HF encode) | plugin-only ms | plugin / floor | all-in ms "
        "| naive ms | naive / plugin |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in [t for t in SHOWN_TURNS if t <= turns]:
        i = t - 1
        lines.append(
            f"| {t} | {med['held'][i]:.0f} | {med['floor'][i]:.3f} | {med['floor_hf'][i]:.3f} | {med['plugin'][i]:.3f} "
            f"| {med['plugin'][i] / med['floor'][i]:.2f}x | {med['all_in'][i]:.3f} | {med['naive'][i]:.2f} "
            f"| {med['naive'][i] / med['plugin'][i]:.0f}x |"
        )
    total = {k: sum(med[k]) for k in ("floor", "plugin", "all_in", "naive")}
    first, last = statistics.mean(med["plugin"][:10]), statistics.mean(med["plugin"][-10:])
    lines += [
        "",
        f"All {turns} turns: floor {total['floor']:.1f} ms, plugin-only {total['plugin']:.1f} ms "
        f"({total['plugin'] / total['floor']:.2f}x the floor), all-in {total['all_in']:.1f} ms, naive "
        f"{total['naive']:.0f} ms. Plugin-only, mean of turns 1-10 vs {turns - 9}-{turns}: {first:.3f} vs "
        f"{last:.3f} ms.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", nargs="+", default=None, help="tokenizer dirs (default: Qwen3's, the embedded one)")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ns = ap.parse_args()
    print(f"{platform.python_version()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for tokenizer_dir in ns.tokenizer or [default_tokenizer_dir()]:
        tokenizer = load_tokenizer(tokenizer_dir)
        opening, tools, pairs = record(tokenizer, tokenizer_dir, ns.tasks)
        runs = [replay(tokenizer, opening, tools, pairs, ns.turns) for _ in range(ns.repeats)]
        print(table(tokenizer_dir, runs, ns.turns))


if __name__ == "__main__":
    main()
