"""Teacher forcing: the model's log-prob of each stored token at the positions that train.

One forward pass gives the hidden states of the whole sample; the output head (hidden x vocabulary) runs only
at the trainable positions, a chunk at a time, because full logits would not fit: 5k tokens x 150k vocabulary
in float32 is 3 GB, 32k tokens 19 GB. The log-prob is the log-softmax of ``logits / temperature``, what SGLang
reports for the token it sampled (``sampling.LOGPROB_SEMANTICS``) and what slime's trainer computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.tools.model import import_torch

CHUNK = 1024
"""Positions per output-head chunk: 1024 x 150k float32 logits is ~600 MB."""


def teacher_log_probs(
    model: Any, device: str, tokens: Sequence[int], positions: Sequence[int], temperature: float
) -> list[float]:
    """Log-prob of ``tokens[p]`` given ``tokens[:p]`` for each ``p`` in ``positions`` (each >= 1)."""
    torch = import_torch()
    if not positions:
        return []
    ids = torch.tensor([list(tokens)], device=device)
    head = model.get_output_embeddings()
    out: list[float] = []
    with torch.inference_mode():
        hidden = getattr(model, model.base_model_prefix)(input_ids=ids).last_hidden_state[0]
        for start in range(0, len(positions), CHUNK):
            at = torch.tensor(positions[start : start + CHUNK], device=device)
            logits = head(hidden[at - 1]).float() / temperature
            picked = torch.log_softmax(logits, dim=-1).gather(1, ids[0, at].unsqueeze(1))
            out.extend(picked[:, 0].tolist())
    return out
