"""One request through a real causal LM: prefill, then one token at a time with a KV cache.

A hand-written loop rather than ``model.generate`` because the server needs three things ``generate`` does
not give: SGLang's log-prob of each sampled token (``sampling.py``), an abort checked between tokens (partial
output, finish ``abort``), and SGLang's finish reasons (``stop`` with the matched id or string, ``length``).
One request at a time: the server queues requests in front of it (``server.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.tools.model import import_torch, load_causal_lm
from slime_tau_plugin.tools.model.sampling import SamplingParams, finite, sample_token, step_seed


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one request generated."""

    ids: tuple[int, ...]  # generated ids, the stop id included (as SGLang returns them)
    log_probs: tuple[float, ...]  # one per id (see sampling.LOGPROB_SEMANTICS)
    finish: dict[str, Any]  # SGLang's finish_reason: {"type": "stop", "matched": id|str}, length, abort
    text: str  # the decoded text, a matched stop string trimmed unless no_stop_trim


class ModelDecoder:
    """A model directory (weights + tokenizer) ready to generate; not thread-safe (one request at a time)."""

    def __init__(self, model_dir: str, device: str | None = None) -> None:
        from slime_tau_plugin.engine.chat.templates import load_tokenizer

        self.model_dir = model_dir
        self.model, self.device = load_causal_lm(model_dir, device)
        self.tokenizer = load_tokenizer(model_dir)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.model.config.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else (eos or ()))
        self.context_len = int(getattr(self.model.config, "max_position_embeddings", 32768))
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])

    def generate(self, input_ids: list[int], params: SamplingParams, aborted: threading.Event) -> Decoded:
        """Generate until a stop id or string, ``max_new_tokens``, or ``aborted`` is set."""
        torch = import_torch()
        generator = torch.Generator()
        ids: list[int] = []
        log_probs: list[float] = []
        finish: dict[str, Any] = {"type": "length", "length": params.max_new_tokens}
        stops = set() if params.ignore_eos else set(params.stop_token_ids | self.eos_ids)
        past = None
        step_input = torch.tensor([input_ids], device=self.device)
        with torch.inference_mode():
            while len(ids) < params.max_new_tokens:
                if aborted.is_set():
                    finish = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
                    break
                out = self.model(input_ids=step_input, past_key_values=past, use_cache=True, logits_to_keep=1)
                past = out.past_key_values
                generator.manual_seed(step_seed(params.seed, len(input_ids) + len(ids)))
                token, log_prob = sample_token(out.logits[0, -1].float().cpu(), params, generator)
                ids.append(token)
                log_probs.append(finite(log_prob))
                if token in stops:
                    finish = {"type": "stop", "matched": token}
                    break
                if params.stop and (matched := self._stop_string(ids, params.stop)):
                    finish = {"type": "stop", "matched": matched}
                    break
                step_input = torch.tensor([[token]], device=self.device)
        text = self.tokenizer.decode(ids, skip_special_tokens=params.skip_special_tokens)
        if isinstance(finish.get("matched"), str) and not params.no_stop_trim:
            text = text[: text.rfind(finish["matched"])]
        return Decoded(tuple(ids), tuple(log_probs), finish, text)

    def _stop_string(self, ids: list[int], stops: tuple[str, ...]) -> str | None:
        """The stop string the generated text now ends with (checked on a short decoded tail), or None."""
        tail = self.tokenizer.decode(ids[-16:], skip_special_tokens=False)
        return next((s for s in stops if s and s in tail), None)
