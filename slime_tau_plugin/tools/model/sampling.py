"""SGLang's sampling semantics for one request: parameters in, one (id, log-prob) per step out.

Read from SGLang's ``SamplingParams`` and sampler (0.5.x):

- ``temperature`` below 1e-6 means greedy: SGLang then sets temperature 1 and ``top_k`` 1, so a greedy
  token's log-prob is the plain log-softmax of the logits.
- The returned log-prob is the log-softmax of ``logits / temperature``, taken *before* top-k, top-p and min-p
  (those only choose the token; they never renormalise the reported log-prob). slime's trainer divides by
  ``--rollout-temperature`` before its own log-softmax, so the two agree.
- Filters apply in SGLang's order: top-k, then top-p (keep the smallest prefix whose mass reaches ``top_p``),
  then min-p (drop tokens below ``min_p`` times the top probability), then one draw from what is left.
- ``sampling_seed`` with the position of the token being drawn seeds that draw (SGLang hashes both in
  ``multinomial_with_seed``): same seed and input, same tokens; one seed reused on every turn of an episode
  still draws differently at each position.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.model import import_torch

LOGPROB_SEMANTICS = "log_softmax(logits / temperature), before top-k/top-p/min-p (SGLang's default)"
"""What ``meta_info.logprob_semantics`` says (and the README)."""
GREEDY_EPS = 1e-6
SGLANG_DEFAULT_MAX_NEW_TOKENS = 128
IGNORED = ("frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens")
"""Accepted and ignored when they hold SGLang's neutral value; any other value is refused (400)."""
NEUTRAL = {"frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_new_tokens": 0}


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """One request's sampling parameters, validated (SGLang's names and defaults)."""

    temperature: float  # 1.0 for greedy requests (as SGLang rewrites them)
    top_p: float
    top_k: int  # -1: all
    min_p: float
    max_new_tokens: int
    stop_token_ids: frozenset[int]
    stop: tuple[str, ...]
    ignore_eos: bool
    seed: int  # the request's generator seed (sampling_seed, or a fresh random one)
    no_stop_trim: bool
    skip_special_tokens: bool

    @property
    def is_greedy(self) -> bool:
        return self.top_k == 1


def parse_sampling_params(raw: Any) -> SamplingParams:
    """SGLang's ``sampling_params`` dict as a :class:`SamplingParams`.

    Raises:
        ConfigError: a value SGLang would refuse, or a penalty this server does not implement (the message
            names the key; the server answers 400 with it).
    """
    raw = dict(raw or {})
    try:
        temperature = float(raw.get("temperature", 1.0))
        top_k = int(raw.get("top_k", -1))
        top_p = float(raw.get("top_p", 1.0))
        min_p = float(raw.get("min_p", 0.0))
        max_new = raw.get("max_new_tokens")
        max_new = SGLANG_DEFAULT_MAX_NEW_TOKENS if max_new is None else int(max_new)
        stop = raw.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        stop_ids = frozenset(int(i) for i in raw.get("stop_token_ids") or ())
        seed = raw.get("sampling_seed")
        seed = random.getrandbits(63) if seed is None else int(seed)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"sampling_params: {exc}") from exc
    if temperature < 0 or not 0 < top_p <= 1 or not 0 <= min_p <= 1 or max_new < 0 or top_k == 0 or top_k < -1:
        raise ConfigError(
            "sampling_params out of range: need temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, "
            "top_k -1 or >= 1, max_new_tokens >= 0"
        )
    for key in IGNORED:
        if key in raw and raw[key] is not None and raw[key] != NEUTRAL[key]:
            raise ConfigError(f"sampling_params.{key}={raw[key]!r} is not implemented by this server")
    if temperature < GREEDY_EPS:
        temperature, top_k = 1.0, 1
    return SamplingParams(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        max_new_tokens=max_new,
        stop_token_ids=stop_ids,
        stop=stop,
        ignore_eos=bool(raw.get("ignore_eos", False)),
        seed=seed,
        no_stop_trim=bool(raw.get("no_stop_trim", False)),
        skip_special_tokens=bool(raw.get("skip_special_tokens", True)),
    )


def step_seed(seed: int, position: int) -> int:
    """The generator seed for the draw at ``position`` (absolute, prompt included) of a request seeded ``seed``."""
    return (seed * 0x9E3779B97F4A7C15 + position * 0xBF58476D1CE4E5B9) % (1 << 63)


def sample_token(logits: Any, params: SamplingParams, generator: Any) -> tuple[int, float]:
    """Choose the next id from float32 ``logits`` (one row) and return it with its SGLang log-prob."""
    torch = import_torch()
    log_probs = torch.log_softmax(logits / params.temperature, dim=-1)
    if params.is_greedy:
        token = int(torch.argmax(logits).item())
        return token, float(log_probs[token].item())
    probs = log_probs.exp()
    if params.top_k > 0 or params.top_p < 1.0 or params.min_p > 0.0:
        probs = _filtered(probs, params)
    # One draw from probs: argmax(probs / Exp(1)) (the exponential-race trick SGLang's and vLLM's samplers use;
    # ~4x faster than torch.multinomial over a 150k vocabulary on CPU).
    race = torch.empty_like(probs).exponential_(generator=generator)
    token = int(torch.argmax(probs / race).item())
    return token, float(log_probs[token].item())


def _filtered(probs: Any, params: SamplingParams) -> Any:
    torch = import_torch()
    sorted_probs, order = torch.sort(probs, descending=True)
    if params.top_k > 0:
        sorted_probs[params.top_k :] = 0.0
    if params.top_p < 1.0:
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs[before > params.top_p] = 0.0
    if params.min_p > 0.0:
        sorted_probs[sorted_probs < sorted_probs[0] * params.min_p] = 0.0
    filtered = torch.zeros_like(probs)
    filtered[order] = sorted_probs
    return filtered / filtered.sum()


def finite(value: float) -> float:
    """A log-prob safe for JSON (``-inf`` for a zero-probability token becomes the float minimum)."""
    return value if math.isfinite(value) else -3.4e38
