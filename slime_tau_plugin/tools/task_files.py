"""The files ``slime-tau prepare`` writes for slime: training rows, eval rows, slime's ``--eval-config`` YAML.

For ``out=data/train.jsonl``, training sets tau2/retail/train + tau2/airline/train, eval set tau2/retail/test::

    data/train.jsonl              --prompt-data: every training set's rows, ``index`` 0..N-1 across the file
    data/tau2_retail_test.jsonl   one file per eval set (its own ``index`` 0..M-1)
    data/train.eval.yaml          --eval-config: one dataset per eval set; only written when there are eval sets

With ``format=RowFormat.VERL`` (``out=data/train.parquet``) the rows are verl's (``adapters/verl/rows.py``)::

    data/train.parquet            data.train_files
    data/train.val.parquet        data.val_files: every eval set in one file (verl reports per data_source)

Rows are ``data.task_row`` (each keeps its own benchmark/domain/split/task id and τ's task dump). Everything
is checked before anything is written (sets, overlaps, output paths, τ's task lists), and files appear by
rename, so a refused or failed run leaves no partial file behind. Printing is the CLI's job.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations, product
from pathlib import Path
from typing import Any

import yaml

from slime_tau_plugin.engine.data import TaskSet, leakage, task_row
from slime_tau_plugin.engine.envs import TaskRef, get_backend
from slime_tau_plugin.engine.errors import ConfigError


class RowFormat(str, enum.Enum):
    """Which trainer reads the rows."""

    SLIME = "slime"
    """JSONL for ``--prompt-data`` / ``--eval-config`` (``--input-key index --metadata-key metadata``)."""
    VERL = "verl"
    """Parquet for verl's ``data.train_files`` / ``data.val_files`` (``agent_name: tau_agent``)."""


TaskFilter = Callable[[TaskSet, list[TaskRef]], tuple[list[TaskRef], str]]
"""A training set's tasks -> the ones to write and a line saying what was dropped (``cli/play/pass_filter.py``)."""
GENERATE_PATH = "slime_tau_plugin.adapters.slime.generate.generate"
"""What slime calls for every eval sample (``custom_generate_function_path`` of each dataset)."""


@dataclass(frozen=True, slots=True)
class PrepareRequest:
    """What to write; ``prepare_files`` checks it all before writing."""

    train: tuple[TaskSet, ...]
    """Training sets, concatenated in this order into ``out``."""
    out: Path
    """The training JSONL; eval files go next to it, the eval YAML is ``out`` with suffix ``.eval.yaml``."""
    evals: tuple[TaskSet, ...] = ()
    eval_samples: int = 1
    """slime's ``n_samples_per_eval_prompt``: episodes per eval task (pass^k needs at least k)."""
    allow_leakage: bool = False
    """Write eval sets that overlap a training set (with a warning) instead of refusing."""
    force: bool = False
    """Overwrite output files that already exist."""
    format: RowFormat = RowFormat.SLIME
    keep: TaskFilter | None = None
    """Which training tasks to keep (``prepare --keep-pass-rate``); its lines go to ``PreparedFiles.notes``."""

    def __post_init__(self) -> None:
        if self.format is RowFormat.VERL and self.out.suffix != ".parquet":
            raise ConfigError(f"--format verl writes parquet; expected --out FILE.parquet, got {self.out}")
        if not self.train:
            raise ConfigError("no training set given; expected at least one BENCHMARK/DOMAIN/SPLIT")
        if isinstance(self.eval_samples, bool) or not isinstance(self.eval_samples, int) or self.eval_samples < 1:
            raise ConfigError(f"eval_samples (--eval-samples)={self.eval_samples!r}; expected an integer >= 1")


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """One JSONL file of task rows."""

    path: Path
    sets: tuple[TaskSet, ...]
    rows: int


@dataclass(frozen=True, slots=True)
class PreparedFiles:
    """What ``prepare_files`` wrote."""

    train: WrittenFile
    evals: tuple[WrittenFile, ...]
    eval_config: Path | None
    """slime ``--eval-config`` YAML; None without eval sets."""
    warnings: tuple[str, ...]
    """Overlaps written anyway because of ``allow_leakage``."""
    notes: tuple[str, ...] = ()
    """What the task filter kept and dropped, one line per training set."""


def eval_file_path(out: Path, task_set: TaskSet) -> Path:
    """Where an eval set's rows go: next to the training file, named after the set."""
    return out.parent / f"{task_set.slug}.jsonl"


def eval_config_path(out: Path) -> Path:
    return out.with_suffix(".eval.yaml")


def prepare_files(request: PrepareRequest) -> PreparedFiles:
    """Check the request, load τ's task lists, then write every file (all or none).

    Raises:
        ConfigError: a set given twice, training sets that repeat tasks, train/eval overlap without
            ``allow_leakage``, an output that is a directory / exists without ``force`` / collides with
            another output / cannot be written, or an unknown split (from the τ backend).
    """
    _check_duplicates(request)
    warnings = _overlaps(request, None)
    eval_groups = _eval_files(request)
    yaml_path = eval_config_path(request.out) if request.evals and request.format is RowFormat.SLIME else None
    _check_outputs([request.out, *eval_groups, *([yaml_path] if yaml_path else [])], request.force)
    refs = {s: _task_refs(s) for s in dict.fromkeys((*request.train, *request.evals))}
    warnings += _overlaps(request, refs)
    notes: list[str] = []
    for task_set in request.train if request.keep is not None else ():
        refs[task_set], line = request.keep(task_set, refs[task_set])
        notes.append(line)

    files = [WrittenFile(request.out, request.train, sum(len(refs[s]) for s in request.train))]
    files += [WrittenFile(p, sets, sum(len(refs[s]) for s in sets)) for p, sets in eval_groups.items()]
    contents: dict[Path, str | bytes] = {
        f.path: _rows(f.sets, refs, request.format, i > 0) for i, f in enumerate(files)
    }
    if yaml_path is not None:
        contents[yaml_path] = eval_config_yaml(files[1:], request.eval_samples)
    _write_all(contents)
    return PreparedFiles(files[0], tuple(files[1:]), yaml_path, tuple(dict.fromkeys(warnings)), tuple(notes))


def _eval_files(request: PrepareRequest) -> dict[Path, tuple[TaskSet, ...]]:
    """slime: one file per eval set (each is a named eval dataset); verl: one ``.val.parquet`` for all."""
    if not request.evals:
        return {}
    if request.format is RowFormat.VERL:
        return {request.out.with_suffix(".val.parquet"): request.evals}
    return {eval_file_path(request.out, s): (s,) for s in request.evals}


def eval_config(files: Sequence[WrittenFile], samples: int = 1) -> dict[str, Any]:
    """slime's ``--eval-config`` mapping (``slime/utils/eval_config.py``: ``EvalDatasetConfig`` fields only).

    Each dataset carries every key it needs rather than relying on ``eval.defaults``, so the entries stay
    right when pasted into an eval YAML whose defaults serve other data (``input_key: prompt``, ...).
    """
    datasets = [
        {
            "name": "+".join(s.slug for s in f.sets),
            "path": str(f.path.resolve()),
            "input_key": "index",
            "metadata_key": "metadata",
            "n_samples_per_eval_prompt": samples,
            "custom_generate_function_path": GENERATE_PATH,
        }
        for f in files
    ]
    return {"eval": {"datasets": datasets}}


def eval_config_yaml(files: Sequence[WrittenFile], samples: int = 1) -> str:
    header = "# slime --eval-config, written by `slime-tau prepare`; one dataset per τ eval set\n"
    return header + yaml.safe_dump(eval_config(files, samples), sort_keys=False, allow_unicode=True)


def _check_duplicates(request: PrepareRequest) -> None:
    for role, sets in (("training", request.train), ("eval", request.evals)):
        repeated = sorted({str(s) for s in sets if sets.count(s) > 1})
        if repeated:
            raise ConfigError(f"{role} set {', '.join(repeated)} is given more than once; list each set once")


def _overlaps(request: PrepareRequest, refs: dict[TaskSet, list[TaskRef]] | None) -> list[str]:
    """Raise for training sets that repeat tasks, and for train/eval overlap unless allowed; else warnings.

    Without ``refs`` the rules of ``data.leakage`` (no τ needed); with them, shared τ² task ids too
    (telecom's ``full`` split holds all the others).
    """
    same_benchmark = [(a, b) for a, b in combinations(request.train, 2) if a.benchmark == b.benchmark]
    repeats = [why for a, b in same_benchmark if (why := _overlap(a, b, refs))]
    if repeats:
        raise ConfigError(
            f"the training sets repeat tasks: {'; '.join(repeats)}; list each task once (drop one of the sets)"
        )
    problems = [why for t, e in product(request.train, request.evals) if (why := _overlap(t, e, refs))]
    if problems and not request.allow_leakage:
        raise ConfigError(
            f"refusing to write overlapping training and evaluation tasks: {'; '.join(problems)}; choose sets "
            "that share no task, or pass --allow-leakage to write them anyway"
        )
    return problems


def _overlap(a: TaskSet, b: TaskSet, refs: dict[TaskSet, list[TaskRef]] | None) -> str | None:
    if refs is None:
        return leakage(a, b)
    if a.benchmark != "tau2" or b.benchmark != "tau2" or a.domain != b.domain or leakage(a, b):
        return None  # rule-based overlaps were reported before the tasks were loaded
    shared = {r.task_id for r in refs[a]} & {r.task_id for r in refs[b]}
    if not shared:
        return None
    return f"{a} and {b} share {len(shared)} tasks (e.g. task id {min(shared)!r})"


def _check_outputs(paths: list[Path], force: bool) -> None:
    """``paths[0]`` is ``--out``; the rest are derived from it."""
    if paths[0].is_dir():
        raise ConfigError(f"--out {paths[0]} is a directory; expected a file path, e.g. {paths[0] / 'train.jsonl'}")
    seen: dict[Path, Path] = {}
    for path in paths:
        if path.resolve() in seen:
            raise ConfigError(f"{path} would be written twice (as training and eval output); choose another --out")
        seen[path.resolve()] = path
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        they = "it" if len(existing) == 1 else "them"
        raise ConfigError(
            f"{', '.join(existing)} already {'exists' if len(existing) == 1 else 'exist'}; "
            f"pass --force to overwrite {they}, or choose another --out"
        )
    directories = [str(p) for p in paths[1:] if p.is_dir()]
    if directories:
        raise ConfigError(f"{', '.join(directories)} is a directory; move it or choose another --out")


def _task_refs(task_set: TaskSet) -> list[TaskRef]:
    return get_backend(task_set.benchmark).task_refs(task_set.domain, task_set.split)


def _rows(
    sets: Sequence[TaskSet], refs: dict[TaskSet, list[TaskRef]], row_format: RowFormat, evaluation: bool
) -> str | bytes:
    """The file's content: every set's tasks, with τ's task dump, indexed 0..N-1 across the file (verl's eval rows
    say they are: verl does not tell its agent loop)."""
    full = []
    for task_set in sets:
        backend = get_backend(task_set.benchmark)
        full += [TaskRef(r.benchmark, r.domain, r.split, r.task_id, backend.task_dump(r)) for r in refs[task_set]]
    if row_format is RowFormat.VERL:
        from slime_tau_plugin.adapters.verl.rows import verl_parquet_bytes, verl_rows

        return verl_parquet_bytes(verl_rows(full, evaluation=evaluation))
    return "".join(json.dumps(task_row(i, ref), ensure_ascii=False) + "\n" for i, ref in enumerate(full))


def _write_all(contents: dict[Path, str | bytes]) -> None:
    """Write each file next to its target, then rename them all into place; on failure remove what was made."""
    temporary: dict[Path, Path] = {}
    try:
        for path, text in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            temporary[path] = tmp
            tmp.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        for path, tmp in temporary.items():
            os.replace(tmp, path)
    except OSError as exc:
        for tmp in temporary.values():
            tmp.unlink(missing_ok=True)
        if isinstance(exc, FileExistsError | NotADirectoryError):  # mkdir met a file on the way
            blocker = next((d for d in path.parents if d.exists() and not d.is_dir()), exc.filename)
            reason = f"{blocker} is a file, not a directory"
        else:
            reason = f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
        raise ConfigError(f"cannot write {path}: {reason}") from exc
