"""A finished (or interrupted) ``slime-tau rollout`` run read back from disk, for ``show``.

A run directory holds ``samples.jsonl`` (one JSON row per episode, appended as episodes finish) and
``summary.json``. Both may be damaged in ordinary ways: a killed run leaves a cut-off last line and maybe no
summary; a run started elsewhere records a relative tokenizer path. Every such case is a one-line
``ConfigError`` naming the file and the fix, never a traceback. Rows stay dicts (new metadata keys pass
through) until :func:`shown_sample` turns the one being shown into a typed :class:`ShownSample`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.engine.errors import ConfigError

RERUN = "pass the --out directory of a 'slime-tau rollout' run"


@dataclass(frozen=True, slots=True)
class SamplesFile:
    """The non-empty lines of ``samples.jsonl``; sample ``i`` is the i-th of them."""

    path: Path
    lines: tuple[bytes, ...]
    line_numbers: tuple[int, ...]  # 1-based line number of each sample in the file
    ends_with_newline: bool

    def __len__(self) -> int:
        return len(self.lines)

    def row(self, i: int) -> dict[str, Any] | None:
        """Row ``i`` as JSON, or None when its line is not one complete JSON object (a cut-off write)."""
        return decode_row(self.lines[i])

    def where(self, i: int) -> str:
        return f"{self.path} line {self.line_numbers[i]}"


@dataclass(frozen=True, slots=True)
class ShownSample:
    """One row of ``samples.jsonl``, checked, with the fields ``show`` renders."""

    index: int  # position in samples.jsonl (what --sample takes)
    metadata: dict[str, Any]  # the row's metadata as written (new keys pass through)
    tokens: tuple[int, ...]  # prompt + response ids
    response_length: int
    loss_mask: tuple[int, ...]  # one per response id
    log_probs: tuple[float, ...] | None  # one per response id, or None when not recorded
    reward: float | None
    status: str  # slime's Sample.Status value: completed, truncated, aborted, failed

    @property
    def prompt_ids(self) -> tuple[int, ...]:
        return self.tokens[: len(self.tokens) - self.response_length]

    @property
    def response_ids(self) -> tuple[int, ...]:
        return self.tokens[len(self.tokens) - self.response_length :]

    def mask_runs(self) -> list[tuple[bool, int, int]]:
        """``(is_trainable, start, end)`` per run of equal loss mask over the response, in order."""
        runs: list[tuple[bool, int, int]] = []
        start = 0
        for i in range(1, self.response_length + 1):
            if i == self.response_length or self.loss_mask[i] != self.loss_mask[start]:
                runs.append((bool(self.loss_mask[start]), start, i))
                start = i
        return runs


def decode_row(line: bytes) -> dict[str, Any] | None:
    """One ``samples.jsonl`` line as a JSON object, or None (a write cut off by a killed run, or not a row)."""
    try:
        row = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return row if isinstance(row, dict) else None


def read_samples(run_dir: str | Path) -> SamplesFile:
    """``run_dir/samples.jsonl`` (or a ``.jsonl`` file given directly), split into sample lines.

    Raises:
        ConfigError: the directory or file is missing or unreadable, or it holds no sample.
    """
    run_dir = Path(run_dir)
    if run_dir.is_file() and run_dir.suffix == ".jsonl":
        path = run_dir
    elif not run_dir.exists():
        raise ConfigError(f"{run_dir} does not exist; {RERUN}")
    elif not run_dir.is_dir():
        raise ConfigError(f"{run_dir} is not a directory; {RERUN}")
    else:
        path = run_dir / "samples.jsonl"
        if not path.exists():
            hint = f" (did you mean {run_dir / 'latest'}?)" if (run_dir / "latest" / "samples.jsonl").exists() else ""
            raise ConfigError(f"{run_dir} has no samples.jsonl{hint}; {RERUN}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    numbered = [(n, line) for n, line in enumerate(data.split(b"\n"), start=1) if line.strip()]
    if not numbered:
        raise ConfigError(f"{path} has no samples: the run finished no episode; run 'slime-tau rollout' again")
    return SamplesFile(
        path=path,
        lines=tuple(line for _, line in numbered),
        line_numbers=tuple(n for n, _ in numbered),
        ends_with_newline=data.endswith(b"\n"),
    )


def broken_samples(samples: SamplesFile) -> list[int]:
    """Indices of the lines that are not one complete JSON object (a cut-off write, a hand edit)."""
    return [i for i in range(len(samples)) if samples.row(i) is None]


def cut_off_warning(samples: SamplesFile) -> str | None:
    """A one-line warning naming every broken line (a killed run cuts off the last), else None."""
    broken = broken_samples(samples)
    if not broken:
        return None
    last = len(samples) - 1
    if broken == [last]:
        return (
            f"warning: {samples.where(last)} is cut off (the run was interrupted while writing it); "
            f"showing the {last} complete samples (0-{last - 1})"
            if last
            else f"warning: {samples.where(last)} is cut off (the run was interrupted while writing it)"
        )
    lines = ", ".join(str(samples.line_numbers[i]) for i in broken)
    good = len(samples) - len(broken)
    return (
        f"warning: {samples.path} line(s) {lines} are not complete JSON rows (samples {_ranges(broken)}); "
        f"showing the {good} complete samples ({_ranges(_good(samples, broken)) or 'none'})"
    )


def shown_sample(samples: SamplesFile, index: int) -> ShownSample:
    """Sample ``index``, checked. Raises ConfigError naming the line and what is wrong with it."""
    row = samples.row(index)
    where = samples.where(index)
    if row is None:
        good = _ranges(_good(samples, broken_samples(samples)))
        complete = f"pick another --sample ({good})" if good else "re-run 'slime-tau rollout'"
        raise ConfigError(
            f"sample {index} ({where}) is not a complete JSON row (cut off by an interrupted run?); {complete}"
        )
    if not isinstance(row.get("metadata"), dict):
        raise ConfigError(
            f"sample {index} ({where}) has no 'metadata' object, so 'slime-tau rollout' did not write it; "
            "show a run directory written by 'slime-tau rollout --out DIR'"
        )
    return shown_row(row, index, where)


def shown_row(row: dict[str, Any], index: int, where: str, *, mask_default: int | None = None) -> ShownSample:
    """One sample dict (a ``samples.jsonl`` row or a slime ``Sample.to_dict()``), checked.

    ``mask_default`` fills a missing loss mask (slime trains every response id when a generate function
    set none); otherwise a missing mask is an error.

    Raises:
        ConfigError: tokens, response length or loss mask are missing or inconsistent (names ``where``).
    """
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    tokens, length, mask = row.get("tokens"), row.get("response_length"), row.get("loss_mask")
    log_probs = row.get("rollout_log_probs")
    if not isinstance(tokens, list) or not isinstance(length, int) or not 0 <= length <= len(tokens):
        raise ConfigError(f"sample {index} ({where}): 'tokens'/'response_length' are missing or inconsistent")
    if mask is None:
        mask = [] if length == 0 else ([mask_default] * length if mask_default is not None else None)
    if not isinstance(mask, list) or len(mask) != length:
        raise ConfigError(f"sample {index} ({where}): 'loss_mask' must hold one 0/1 per response id ({length})")
    if log_probs is not None and (not isinstance(log_probs, list) or len(log_probs) != length):
        log_probs = None  # a partial list would misalign every hover; show none rather than wrong ones
    reward, status = row.get("reward"), row.get("status", "?")
    return ShownSample(
        index=index,
        metadata=meta,
        tokens=tuple(tokens),
        response_length=length,
        loss_mask=tuple(int(m) for m in mask),
        log_probs=tuple(float(x) for x in log_probs) if log_probs is not None else None,
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        status=str(getattr(status, "value", status)),
    )


def task_key(meta: dict[str, Any]) -> str:
    """The τ task id of a row (``task_ref.task_id_of``) as a string (``None`` when the row names none)."""
    return str(task_id_of(meta))


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """``run_dir/summary.json``. Raises ConfigError when it is missing, unreadable or not a JSON object."""
    path = Path(run_dir) / "summary.json"
    if not Path(run_dir).exists():
        raise ConfigError(f"{run_dir} does not exist; {RERUN}")
    if not Path(run_dir).is_dir():
        raise ConfigError(f"{run_dir} is not a run directory; {RERUN}")
    if not path.exists():
        raise ConfigError(f"{path} does not exist (a run writes it when it ends); {RERUN}")
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); re-run the rollout to write it again") from exc
    if not isinstance(summary, dict):
        raise ConfigError(f"{path} is not a JSON object; re-run the rollout to write it again")
    return summary


def resolve_tokenizer(run_dir: str | Path, explicit: str | None) -> str:
    """The tokenizer directory to decode a run with: ``--tokenizer``, else the one ``summary.json`` records.

    A recorded relative path is tried as is, then relative to the run directory, the ``cwd`` the summary
    records (if any) and each parent of the run directory, so ``show`` works from any directory.

    Raises:
        ConfigError: no tokenizer is known or none of the candidates exists; the message names ``--tokenizer``.
    """
    if explicit is not None:
        if not Path(explicit).exists():
            raise ConfigError(f"--tokenizer {explicit}: no such directory; pass the tokenizer directory the run used")
        return explicit
    run_dir = Path(run_dir)
    if run_dir.is_file():  # a samples.jsonl given directly
        run_dir = run_dir.parent
    if not (run_dir / "summary.json").exists():
        raise ConfigError(
            f"{run_dir / 'summary.json'} does not exist, so the run's tokenizer is unknown; "
            "pass --tokenizer DIR (the tokenizer the rollout used)"
        )
    try:
        summary = read_summary(run_dir)
    except ConfigError as exc:
        raise ConfigError(f"{exc}, or pass --tokenizer DIR") from exc
    recorded = summary.get("tokenizer")
    if isinstance(recorded, dict):  # tolerate {"path": ...} records
        recorded = recorded.get("path") or recorded.get("dir")
    if not isinstance(recorded, str) or not recorded:
        raise ConfigError(
            f"{run_dir / 'summary.json'} records no tokenizer; pass --tokenizer DIR (the tokenizer the rollout used)"
        )
    bases = [Path(), run_dir]
    if isinstance(summary.get("cwd"), str):
        bases.append(Path(summary["cwd"]))
    bases += list(run_dir.resolve().parents)
    for base in bases:
        candidate = base / recorded
        if candidate.exists():
            return str(candidate)
    raise ConfigError(
        f"the tokenizer {recorded!r} recorded in {run_dir / 'summary.json'} does not exist here (tried it as is and "
        f"relative to {run_dir}); pass --tokenizer DIR"
    )


def _good(samples: SamplesFile, broken: list[int]) -> list[int]:
    skip = set(broken)
    return [i for i in range(len(samples)) if i not in skip]


def _ranges(indices: list[int]) -> str:
    """``[0, 1, 3, 4, 5]`` → ``0-1, 3-5``."""
    parts: list[str] = []
    for i in indices:
        if parts and int(parts[-1].split("-")[-1]) == i - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{i}"
        else:
            parts.append(str(i))
    return ", ".join(parts)
