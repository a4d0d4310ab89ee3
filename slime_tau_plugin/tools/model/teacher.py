"""Teacher forcing: the model's log-prob of each stored token at the positions that train.

Memory grows linearly with the sample, not with its square: the sample goes through the model in blocks of
``block`` tokens, each block attending to the KV cache of those before it. In float32, attention runs on PyTorch's
math kernel (flash attention has no float32 path), which materialises ``heads x queries x keys`` scores: a
16k-token sample through a 4B-shaped model peaked at 94 GiB in one pass (an H200, measured), a 32k one asked for
128 GiB at once. In blocks the scores are ``heads x block x keys`` and the cache ``2 x layers x kv_heads x head_dim
x keys`` (benchmarks/verify_memory.md). A sample no longer than one block takes the one-pass path, as before.

The output head (hidden x vocabulary) runs only at the trainable positions, a chunk at a time, because full logits
would not fit: 5k tokens x 150k vocabulary in float32 is 3 GB. The log-prob is the log-softmax of
``logits / temperature``, what SGLang reports for the token it sampled (``sampling.LOGPROB_SEMANTICS``) and what
slime's trainer computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.tools.model import import_torch

CHUNK = 1024
"""Positions per output-head chunk: 1024 x 150k float32 logits is ~600 MB."""

BLOCK = 2048
"""Tokens per forward block (``verify --block-tokens``): a 4B-shaped model's float32 scores for one block over a
32k-token cache are 32 heads x 2048 x 32k x 4 B = 8 GiB, freed layer by layer."""


def teacher_log_probs(
    model: Any,
    device: str,
    tokens: Sequence[int],
    positions: Sequence[int],
    temperature: float,
    *,
    block: int = BLOCK,
) -> list[float]:
    """Log-prob of ``tokens[p]`` given ``tokens[:p]`` for each ``p`` in ``positions`` (each >= 1, ascending).

    Raises:
        ValueError: ``block`` < 1.
    """
    if block < 1:
        raise ValueError(f"block={block} must be at least 1")
    torch = import_torch()
    if not positions:
        return []
    ids = torch.tensor([list(tokens)], device=device)
    base = getattr(model, model.base_model_prefix)
    out: list[float] = []
    with torch.inference_mode():
        if len(tokens) <= block:
            hidden = base(input_ids=ids).last_hidden_state[0]
            out.extend(_head_log_probs(model, hidden, ids[0], positions, 0, temperature))
            return out
        from transformers import DynamicCache

        cache = DynamicCache()
        last = positions[-1]  # the last block needed ends at the state before the last trained token
        at = 0  # next index into positions
        for start in range(0, last, block):
            end = min(start + block, last)
            hidden = base(input_ids=ids[:, start:end], past_key_values=cache, use_cache=True).last_hidden_state[0]
            stop = at
            while stop < len(positions) and positions[stop] - 1 < end:
                stop += 1
            out.extend(_head_log_probs(model, hidden, ids[0], positions[at:stop], start, temperature))
            at = stop
    return out


def _head_log_probs(
    model: Any, hidden: Any, ids: Any, positions: Sequence[int], offset: int, temperature: float
) -> list[float]:
    """The log-probs at ``positions`` from a block's hidden states (``hidden[i]`` is the state after token
    ``offset + i``), the output head a chunk at a time."""
    torch = import_torch()
    head = model.get_output_embeddings()
    out: list[float] = []
    for start in range(0, len(positions), CHUNK):
        at = torch.tensor(positions[start : start + CHUNK], device=ids.device)
        logits = head(hidden[at - 1 - offset]).float() / temperature
        picked = torch.log_softmax(logits, dim=-1).gather(1, ids[at].unsqueeze(1))
        out.extend(picked[:, 0].tolist())
    return out
