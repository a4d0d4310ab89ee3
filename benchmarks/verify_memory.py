"""Peak memory of ``verify``'s teacher forcing against the sample's length, in one pass and in blocks.

Usage (results: benchmarks/verify_memory.md):
    python benchmarks/verify_memory.py --shape tiny --lengths 2048,8192,32768 --blocks 0,2048 --attn eager
    python benchmarks/verify_memory.py --shape 4b --device cuda --lengths 4096,16384,32768 --blocks 0,2048,1024
    python benchmarks/verify_memory.py --shape 8b --device cuda --lengths 16384,32768 --blocks 2048,4096

Block 0 is the one-pass path (the whole sample as one block). ``--shape tiny`` is the test suite's tiny model
(hidden 64, 2 layers, 4 heads, Qwen's 151,936-id vocabulary); ``4b`` is Qwen3-4B's shape (36 layers, 32 heads,
8 KV heads, hidden 2,560) and ``8b`` Qwen3-8B's (hidden 4,096): random weights, float32 as ``verify`` loads them.
On CPU each case runs in a process of its own and its peak is the resident set's high-water mark above the level
before the call (a thread samples ``/proc/self/statm``); on CUDA, ``torch.cuda.max_memory_allocated`` above the
level before the call. ``--attn eager`` materialises the attention scores the way PyTorch's float32 math kernel
does on a GPU (on CPU, sdpa has a float32 flash kernel, which hides the square). Each case's log-probs are compared
with the first case of its length.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

SHAPES = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, head_dim=16),
    "4b": dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=9728, head_dim=128),
    "8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=12288, head_dim=128),
}  # fmt: skip
VOCAB = 151_936


def build_model(shape: str, device: str, attn: str):
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=VOCAB, max_position_embeddings=65536, tie_word_embeddings=False, **SHAPES[shape])
    config._attn_implementation = attn
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model.eval()


def sample(length: int) -> tuple[list[int], list[int]]:
    """Random ids and an episode-like mask: runs of 256 trained tokens, a third of the response after a prompt."""
    rng = random.Random(length)
    tokens = [rng.randrange(VOCAB) for _ in range(length)]
    return tokens, [p for p in range(length // 8, length) if (p // 256) % 3 == 0]


class RssPeak:
    """The resident set's peak above its level at start, sampled every millisecond."""

    def __init__(self) -> None:
        self.base = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _poll(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


def run_case(model, device: str, length: int, block: int) -> dict:
    import torch

    from slime_tau_plugin.tools.model.teacher import teacher_log_probs

    tokens, positions = sample(length)
    block = block or length
    row = {"length": length, "block": block if block < length else 0, "positions": len(positions)}
    start = time.perf_counter()
    try:
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            out = teacher_log_probs(model, device, tokens, positions, 1.0, block=block)
            torch.cuda.synchronize()
            row["peak_gib"] = (torch.cuda.max_memory_allocated() - before) / 2**30
        else:
            with RssPeak() as rss:
                out = teacher_log_probs(model, device, tokens, positions, 1.0, block=block)
            row["peak_gib"] = (rss.peak - rss.base) / 2**30
        row["log_probs"] = out
    except torch.OutOfMemoryError as exc:
        row["error"] = " ".join(str(exc).split())[:160]
        torch.cuda.empty_cache()
    row["seconds"] = time.perf_counter() - start
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    p.add_argument("--device", default="cpu")
    p.add_argument("--attn", default="sdpa", help="transformers attention implementation (sdpa, eager)")
    p.add_argument("--lengths", default="2048,8192,32768")
    p.add_argument("--blocks", default="0,2048", help="0 = one pass")
    p.add_argument("--one", nargs=2, type=int, metavar=("LENGTH", "BLOCK"), help=argparse.SUPPRESS)
    ns = p.parse_args()
    if ns.one:  # a CPU case in its own process
        print(json.dumps(run_case(build_model(ns.shape, ns.device, ns.attn), ns.device, *ns.one)))
        return
    cases = [(int(n), int(b)) for n in ns.lengths.split(",") for b in ns.blocks.split(",")]
    model = build_model(ns.shape, ns.device, ns.attn) if ns.device == "cuda" else None
    print(f"shape {ns.shape}, device {ns.device}, attention {ns.attn}")
    if model is not None:
        import torch

        print(f"weights and buffers on the GPU: {torch.cuda.memory_allocated() / 2**30:.2f} GiB")
    head = f"{'tokens':>7} {'block':>6} {'trained':>7} {'peak GiB':>9} {'GiB/1k tok':>10} {'s':>7}"
    print(f"{head} {'max|Δ| vs first':>15}")
    first: dict[int, list[float]] = {}
    for length, block in cases:
        if model is None:
            cmd = [sys.executable, __file__, "--shape", ns.shape, "--attn", ns.attn, "--one", str(length), str(block)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            lines = done.stdout.strip().splitlines()
            row = json.loads(lines[-1]) if done.returncode == 0 and lines else {
                "length": length, "block": block, "positions": 0, "seconds": 0.0,
                "error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:] or ''}",
            }  # fmt: skip
        else:
            row = run_case(model, ns.device, length, block)
        out = row.pop("log_probs", None)
        delta = "-"
        if out is not None:
            ref = first.setdefault(length, out)
            delta = f"{max(abs(a - b) for a, b in zip(ref, out, strict=True)):.2e}" if ref is not out else "(reference)"
        block_s = str(row["block"] or "one pass")
        if "error" in row:
            print(f"{length:>7} {block_s:>6} {row['positions']:>7}  {row['error']}")
            continue
        per_k = row["peak_gib"] / length * 1000
        print(
            f"{length:>7} {block_s:>6} {row['positions']:>7} {row['peak_gib']:>9.2f} {per_k:>10.3f} "
            f"{row['seconds']:>7.1f} {delta:>15}",
            flush=True,
        )


if __name__ == "__main__":
    main()
