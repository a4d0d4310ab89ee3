"""``slime-tau make-tiny-model``: a small random causal LM with a real tokenizer, for CPU runs and tests.

The model (``model/tiny.py``) has the tokenizer's full vocabulary and chat template and ends a turn with the
template's end-of-turn id after about ``--mean-turn-tokens`` tokens, so episodes last several turns.
Needs torch (the ``model`` extra); without it the command fails in one line naming the CPU wheel.
"""

from __future__ import annotations

import argparse

from slime_tau_plugin.tools.cli.args import non_negative_float


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("make-tiny-model", help="build a small random causal LM from a tokenizer (needs torch)")
    d = "(default: %(default)s)"
    p.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer directory with a chat template")
    p.add_argument("--out", required=True, help="directory to write the model, config and tokenizer files to")
    p.add_argument("--arch", default="qwen2", choices=["qwen2", "qwen3", "llama"], help=f"architecture {d}")
    p.add_argument("--seed", type=int, default=0, help=f"same seed, same weights {d}")
    p.add_argument("--mean-turn-tokens", type=non_negative_float, default=20.0, help=f"mean tokens per model turn {d}")


def run(ns: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from slime_tau_plugin.tools.model.tiny import TinyModelSpec, make_tiny_model

    spec = TinyModelSpec(ns.tokenizer, ns.out, arch=ns.arch, seed=ns.seed, mean_turn_tokens=ns.mean_turn_tokens)
    built = make_tiny_model(spec)
    print(
        f"wrote {built.out_dir}: {ns.arch}, {built.parameters / 1e6:.1f}M parameters, vocabulary {built.vocab_size}, "
        f"end of turn {built.eot_text!r} (id {built.eot_id}) with p={built.eot_probability:.3f} per token "
        f"(~{ns.mean_turn_tokens:g} tokens per turn), {built.seconds:.1f}s"
    )
    return 0
