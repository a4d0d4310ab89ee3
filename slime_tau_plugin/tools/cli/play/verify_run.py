"""``verify``'s driver: teacher-force every sample of a finished run and compare with the stored log-probs.

The network (``model/``) never reads run files; this module reads them and hands ``model/`` token ids.

Reads what ``show`` reads: a run directory (``cli/run_dir/run_files.py``: ``samples.jsonl`` rows with ``tokens``,
``response_length``, ``loss_mask``, ``rollout_log_probs``, ``metadata``, and the sampling temperature from
``summary.json``'s ``run.sampling.temperature``; 0, greedy, counts as 1 as in SGLang), or slime's
``--save-debug-rollout-data`` dumps (``cli/run_dir/rollout_dump.py``). A row cut off by a killed run is skipped with a
warning; any other unreadable row is bad input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.run_dir.rollout_dump import is_dump_path, pick_dump, read_dump
from slime_tau_plugin.tools.cli.run_dir.run_files import (
    ShownSample,
    read_samples,
    read_summary,
    resolve_tokenizer,
    shown_row,
    shown_sample,
    task_key,
)
from slime_tau_plugin.tools.model.checks import SampleCheck, TemplateMarks, compare_sample, mask_errors, trainable_runs
from slime_tau_plugin.tools.model.drift import text_drift
from slime_tau_plugin.tools.model.sampling import GREEDY_EPS


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Every sample's verdict and the run's totals."""

    run_dir: str
    model_dir: str
    temperature: float
    tolerance: float
    samples: tuple[SampleCheck, ...]
    skipped: tuple[str, ...]  # warnings about rows left out (a cut-off last line)

    @property
    def is_ok(self) -> bool:
        return all(s.is_ok() for s in self.samples)

    def totals(self) -> dict[str, Any]:
        compared = sum(s.compared for s in self.samples)
        return {
            "samples": len(self.samples),
            "within_tolerance": sum(s.is_ok() for s in self.samples),
            "turns_mean": sum(s.turns for s in self.samples) / max(len(self.samples), 1),
            "trainable_tokens": sum(s.trainable for s in self.samples),
            "max_abs": max((s.max_abs for s in self.samples), default=0.0),
            "mean_abs": sum(s.mean_abs * s.compared for s in self.samples) / compared if compared else 0.0,
            "missing_log_probs": sum(s.missing_log_probs for s in self.samples),
            "mask_errors": sum(len(s.mask_errors) for s in self.samples),
        }


def run_temperature(run_dir: str) -> float:
    """The run's sampling temperature from ``summary.json`` (greedy counts as 1). Raises ConfigError."""
    summary = read_summary(run_dir)
    sampling = (summary.get("run") or {}).get("sampling") or {}
    temperature = sampling.get("temperature")
    if not isinstance(temperature, (int, float)):
        raise ConfigError(f"{Path(run_dir) / 'summary.json'} records no run.sampling.temperature; pass --temperature T")
    return 1.0 if temperature < GREEDY_EPS else float(temperature)


def template_marks(template: ChatTemplate) -> TemplateMarks:
    """The end-of-turn id and the generation prompt ids of the chat template."""
    if len(template.eot_ids) != 1:
        raise ConfigError(f"the chat template's end-of-turn {template.eot_text!r} is not a single id")
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    opened = template.render(messages, add_generation_prompt=True)
    closed = template.render(messages, add_generation_prompt=False)
    suffix = opened[len(closed) :] if opened.startswith(closed) else ""
    return TemplateMarks(template.eot_ids[0], tuple(template.encode(suffix)))


def verify_run(
    run_dir: str,
    model_dir: str,
    *,
    tolerance: float,
    temperature: float | None = None,
    block_tokens: int | None = None,
) -> VerifyReport:
    """Teacher-force every sample of ``run_dir`` through ``model_dir``, ``block_tokens`` at a time
    (``teacher.BLOCK`` by default: memory linear in the sample's length).

    Raises:
        ConfigError: unreadable run directory or model, or a row that is not a sample (bad input, exit 2).
    """
    from slime_tau_plugin.tools.cli.args import load_tokenizer_for
    from slime_tau_plugin.tools.model import import_torch, load_causal_lm
    from slime_tau_plugin.tools.model.teacher import BLOCK, teacher_log_probs

    import_torch()  # fail on a missing torch before reading anything
    samples, where, temperature, skipped = _read(run_dir, temperature)
    tokenizer = load_tokenizer_for("--model", model_dir)
    if not is_dump_path(run_dir):
        check_run_tokenizer(run_dir, model_dir, tokenizer)  # before the (slow) model load
    model, device = load_causal_lm(model_dir)  # float32; CUDA when torch sees one (real weights on a GPU node)
    vocab = int(model.get_output_embeddings().weight.shape[0])
    template = ChatTemplate(tokenizer)
    marks = template_marks(template)
    checks: list[SampleCheck] = []
    for i, sample in enumerate(samples):
        if sample.tokens and not 0 <= min(sample.tokens) <= max(sample.tokens) < vocab:
            raise ConfigError(f"sample {i} ({where[i]}) holds token ids outside the model's vocabulary ({vocab})")
        prompt_len = len(sample.prompt_ids)
        positions = [prompt_len + a for s, e in trainable_runs(sample.loss_mask) for a in range(s, e)]
        if positions and positions[0] == 0:
            raise ConfigError(f"sample {i} ({where[i]}) trains its first token, which has no context")
        teacher = teacher_log_probs(model, device, sample.tokens, positions, temperature, block=block_tokens or BLOCK)
        termination = str(sample.metadata.get("termination_reason", ""))
        errors = mask_errors(sample.response_ids, sample.prompt_ids, sample.loss_mask, marks, termination)
        meta = sample.metadata
        drift = text_drift(template, sample.tokens, meta.get("messages"), meta.get("tools"), prompt_len)
        trial = meta.get("trial")
        checks.append(
            compare_sample(
                index=i,
                task=task_key(sample.metadata),
                trial=trial if isinstance(trial, int) else None,
                mask=sample.loss_mask,
                rollout=sample.log_probs,
                teacher=teacher,
                tolerance=tolerance,
                errors=errors,
                text_drift=drift,
            )
        )
    return VerifyReport(str(run_dir), model_dir, temperature, tolerance, tuple(checks), tuple(skipped))


def check_run_tokenizer(run_dir: str, model_dir: str, tokenizer: Any) -> None:
    """The run's recorded tokenizer (``summary.json``) tokenizes like ``--model``'s: else the ids were read as
    other text during the rollout, and matching log-probs would prove nothing about it.

    Raises:
        ConfigError: the two differ (one line naming both); a run that records no usable tokenizer is not compared.
    """
    from slime_tau_plugin.engine.chat.templates import load_tokenizer
    from slime_tau_plugin.tools.cli.play.server_match import tokenizers_differ_at

    try:
        recorded = resolve_tokenizer(run_dir, None)
    except ConfigError:
        return
    if Path(recorded).resolve() == Path(model_dir).resolve():
        return
    at = tokenizers_differ_at(load_tokenizer(recorded), tokenizer)
    if at is not None:
        raise ConfigError(
            f"{run_dir} was rolled out with the tokenizer {recorded} (summary.json), not --model {model_dir}'s: the "
            f"same text gives other ids from position {at}; pass the model the rollout's server served"
        )


def _read(run_dir: str, temperature: float | None) -> tuple[list[ShownSample], list[str], float, list[str]]:
    """The samples, where each was read, the temperature and warnings, from a run directory or a slime dump.

    A slime ``--save-debug-rollout-data`` file (or a directory of them: the newest) records no temperature, so
    it needs ``--temperature`` (slime's ``--rollout-temperature``); a sample without a loss mask trains every
    response id, as in slime.
    """
    if is_dump_path(run_dir):
        if temperature is None:
            raise ConfigError(
                f"{run_dir} is a slime rollout dump, which records no temperature; pass --temperature "
                "(slime's --rollout-temperature)"
            )
        path = Path(run_dir)
        dump = read_dump(pick_dump(path, None) if path.is_dir() else path)
        wheres = [dump.where(i) for i in range(len(dump))]
        return [shown_row(dump.row(i), i, wheres[i], mask_default=1) for i in range(len(dump))], wheres, temperature, []
    samples = read_samples(run_dir)
    temperature = run_temperature(run_dir) if temperature is None else temperature
    count, skipped = len(samples), []
    if samples.row(count - 1) is None:
        skipped.append(f"{samples.where(count - 1)} is cut off (an interrupted run); left out")
        count -= 1
    wheres = [samples.where(i) for i in range(count)]
    return [shown_sample(samples, i) for i in range(count)], wheres, temperature, skipped
