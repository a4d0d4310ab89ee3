"""``make-tiny-model``: a small random causal LM with a real tokenizer, whose turns end after a chosen length.

A random network spreads its probability almost uniformly over a 150k vocabulary, so it would (almost) never
emit the end-of-turn id: every turn would run to ``max_new_tokens`` and every episode would end after one
turn. So every input embedding gets a shared direction ``d`` (it survives two small random layers and the
final norm), the end-of-turn row of the output head points along ``d``, and that row's length is calibrated
(bisection over chat-like input) so that the mean per-step log-probability of *not* ending,
``mean(log(1 - p))``, equals ``log(1 - 1 / mean_turn_tokens)`` at temperature 1: turn lengths are then roughly
geometric with that mean (matching the mean of ``p`` instead would make turns shorter, since ``p`` varies).

Same seed, same weights (torch's CPU generator, no time-dependent state). No hub access: the config is built
here and the tokenizer's own files are copied verbatim next to the weights (so the chat template is the
tokenizer's, byte for byte).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.chat.templates import ChatTemplate, load_tokenizer
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.model import import_torch

ARCHS = ("qwen2", "qwen3", "llama")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.model",
)
MANIFEST = "tiny_model.json"
"""What was built and how it was calibrated (read by nothing; for people and reports)."""


@dataclass(frozen=True, slots=True)
class TinyModelSpec:
    """What to build: the architecture and sizes are small enough for tens of tokens/s on two CPU cores."""

    tokenizer_dir: str
    out_dir: str
    arch: str = "qwen2"
    seed: int = 0
    mean_turn_tokens: float = 20.0
    hidden_size: int = 64  # x 150k vocabulary x 2 (untied embeddings and head): ~20M parameters, ~80 MB
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 128
    context_len: int = 32768
    shared_direction_scale: float = 1.0  # the embedding rows are ~N(0, 0.02): d dominates them


@dataclass(frozen=True, slots=True)
class TinyModel:
    """What was built."""

    out_dir: str
    parameters: int
    vocab_size: int
    eot_id: int  # the chat template's end-of-turn id (also eos_token_id of config and generation_config)
    eot_text: str
    eot_row_norm: float  # calibrated length of the end-of-turn output row
    eot_probability: float  # mean per-step probability of the end-of-turn id on the calibration input
    seconds: float


def make_tiny_model(spec: TinyModelSpec) -> TinyModel:
    """Build, calibrate and save the model; see the module docstring for why the end-of-turn row is shaped.

    Raises:
        ConfigError: unknown arch, a bad mean length, no usable tokenizer or chat template, or an unwritable
            output directory.
    """
    started = time.perf_counter()
    if spec.arch not in ARCHS:
        raise ConfigError(f"--arch {spec.arch!r} is unknown; expected one of {', '.join(ARCHS)}")
    if not spec.mean_turn_tokens >= 2:
        raise ConfigError(f"--mean-turn-tokens {spec.mean_turn_tokens} must be at least 2")
    torch = import_torch()
    tokenizer = load_tokenizer(spec.tokenizer_dir)
    template = ChatTemplate(tokenizer)
    if len(template.eot_ids) != 1:
        raise ConfigError(
            f"the chat template's end-of-turn {template.eot_text!r} is {len(template.eot_ids)} ids, not one; "
            "a tiny model needs a single end-of-turn id"
        )
    eot_id = template.eot_ids[0]
    torch.manual_seed(spec.seed)
    model = _random_model(spec, len(tokenizer), eot_id, tokenizer)
    norm, probability = _shape_end_of_turn(model, spec, eot_id, _calibration_ids(template, len(tokenizer), spec.seed))
    out = Path(spec.out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        _copy_tokenizer(Path(spec.tokenizer_dir), out, tokenizer)
    except OSError as exc:
        raise ConfigError(f"cannot write the model to {out}: {exc.strerror or exc}") from exc
    built = TinyModel(
        out_dir=str(out),
        parameters=sum(p.numel() for p in model.parameters()),
        vocab_size=len(tokenizer),
        eot_id=eot_id,
        eot_text=template.eot_text,
        eot_row_norm=round(norm, 6),
        eot_probability=round(probability, 6),
        seconds=round(time.perf_counter() - started, 2),
    )
    (out / MANIFEST).write_text(json.dumps({"spec": asdict(spec), "built": asdict(built)}, indent=1) + "\n")
    return built


def _random_model(spec: TinyModelSpec, vocab_size: int, eot_id: int, tokenizer: Any) -> Any:
    torch = import_torch()
    import transformers

    config_class = {"qwen2": "Qwen2Config", "qwen3": "Qwen3Config", "llama": "LlamaConfig"}[spec.arch]
    config = getattr(transformers, config_class)(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.hidden_size // spec.num_heads,
        max_position_embeddings=spec.context_len,
        tie_word_embeddings=False,
        eos_token_id=eot_id,
        bos_token_id=tokenizer.bos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = eot_id
    model.generation_config.do_sample = True
    return model.eval()


def _calibration_ids(template: ChatTemplate, vocab_size: int, seed: int) -> Any:
    """Chat-like inputs: a rendered conversation prefix followed by random ids (what the model sees in a turn)."""
    torch = import_torch()
    messages = [
        {"role": "system", "content": "You are a retail agent."},
        {"role": "user", "content": "Hi, I need help."},
    ]
    prefix = torch.tensor(template.prompt_ids(messages))
    generator = torch.Generator().manual_seed(seed + 1)
    rows = [torch.cat([prefix, torch.randint(0, vocab_size, (96,), generator=generator)]) for _ in range(4)]
    return torch.stack(rows)


def _shape_end_of_turn(model: Any, spec: TinyModelSpec, eot_id: int, input_ids: Any) -> tuple[float, float]:
    """Add the shared direction to the embeddings and calibrate the end-of-turn row; return (norm, probability)."""
    torch = import_torch()
    generator = torch.Generator().manual_seed(spec.seed + 2)
    direction = torch.randn(spec.hidden_size, generator=generator)
    direction /= direction.norm()
    head = model.get_output_embeddings().weight
    with torch.no_grad():
        model.get_input_embeddings().weight += spec.shared_direction_scale * direction
        head[eot_id] = 0.0
        hidden = getattr(model, model.base_model_prefix)(input_ids=input_ids).last_hidden_state
        hidden = hidden[:, -96:].reshape(-1, spec.hidden_size)  # positions that predict a model token
        others = torch.logsumexp(hidden @ head.T, dim=-1)  # the end-of-turn row is zero here: exp(0) = 1 extra
        others = torch.log(torch.exp(others) - 1.0)
        along = hidden @ direction
        target = math.log1p(-1.0 / spec.mean_turn_tokens)

        def survival(norm: float) -> float:  # mean log(1 - p): decreases as the row grows
            return torch.nn.functional.logsigmoid(-(norm * along - others)).mean().item()

        low, high = 0.0, 1.0
        while survival(high) > target:
            high *= 2.0
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if survival(middle) > target else (low, middle)
        head[eot_id] = high * direction
        probability = torch.sigmoid(high * along - others).mean().item()
    return high, probability


def _copy_tokenizer(source: Path, out: Path, tokenizer: Any) -> None:
    """Copy the tokenizer's own files verbatim; save through transformers only when none is a known file."""
    copied = [name for name in TOKENIZER_FILES if (source / name).is_file()]
    for name in copied:
        shutil.copyfile(source / name, out / name)
    if not copied:
        tokenizer.save_pretrained(out)
