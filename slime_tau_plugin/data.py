"""τ tasks <-> JSONL rows for slime (``--input-key index --metadata-key metadata``).

Row shape (one per task)::

    {"index": 7, "metadata": {"benchmark": "tau2", "domain": "retail", "split": "train",
                              "task_id": "7", "task": {...τ's own task dump...}}}

With ``--input-key index`` slime hands the raw ``index`` value to ``generate`` as ``sample.prompt`` and
the ``metadata`` dict as ``sample.metadata``; :func:`task_ref_from_sample` turns them back into a
:class:`TaskRef`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import TauConfig, check_domain
from .envs import TaskRef, get_backend
from .errors import ConfigError


def task_row(index: int, ref: TaskRef) -> dict[str, Any]:
    """The JSONL row slime reads for one task."""
    metadata: dict[str, Any] = {"benchmark": ref.benchmark, "domain": ref.domain, "split": ref.split}
    metadata["task_index" if ref.benchmark == "tau1" else "task_id"] = ref.task_id
    if ref.task is not None:
        metadata["task"] = ref.task
    return {"index": index, "metadata": metadata}


def task_ref_from_sample(prompt: Any, metadata: dict[str, Any] | None, config: TauConfig) -> TaskRef:
    """Which task a slime sample plays.

    Metadata wins (benchmark, domain, split, task_id/task_index, task); otherwise ``prompt`` is the
    task's position in the configured split (slime's ``--input-key index``).

    Raises:
        ConfigError: the sample names an unknown benchmark/domain/split, or no task at all.
    """
    metadata = metadata or {}
    benchmark = metadata.get("benchmark", config.benchmark)
    domain = metadata.get("domain", config.domain)
    split = metadata.get("split", config.split)
    check_domain(benchmark, domain)
    task_id = metadata.get("task_id", metadata.get("task_index"))
    if task_id is not None:
        return TaskRef(benchmark, domain, split, str(task_id), metadata.get("task"))
    if isinstance(prompt, int) or (isinstance(prompt, str) and prompt.strip().isdigit()):
        refs = get_backend(benchmark).task_refs(domain, split)
        position = int(prompt)
        if not 0 <= position < len(refs):
            raise ConfigError(
                f"sample.prompt={prompt!r} is out of range: {benchmark}/{domain}/{split} has {len(refs)} tasks"
            )
        return refs[position]
    raise ConfigError(
        "sample names no task: expected metadata with 'task_id' (tau2) or 'task_index' (tau1), or an integer "
        f"prompt (slime --input-key index); got prompt={str(prompt)[:80]!r}, metadata keys={sorted(metadata)}"
    )


def parse_task_set(spec: str) -> tuple[str, str, str]:
    """``"tau2/retail/train"`` -> (benchmark, domain, split). Raises ConfigError when malformed."""
    parts = spec.strip().split("/")
    if len(parts) != 3 or not all(parts):
        raise ConfigError(f"task set {spec!r} is malformed; expected BENCHMARK/DOMAIN/SPLIT, e.g. tau2/retail/test")
    check_domain(parts[0], parts[1])
    return parts[0], parts[1], parts[2]


_TAU2_SPLITS_IN_BASE = {"train", "test"}
"""τ²'s ``base`` split is train + test."""


def leakage(train: tuple[str, str, str], evaluation: tuple[str, str, str]) -> str | None:
    """Why evaluating on ``evaluation`` after training on ``train`` would leak, or None.

    τ² retail/airline tasks are revised τ-bench v1 *test* tasks (63/74 τ² retail train tasks share their
    gold actions with a v1 test task), so v1 test and any τ² retail/airline split overlap; within one
    benchmark, equal splits overlap and τ²'s ``base`` contains ``train`` and ``test``.
    """
    (tb, td, ts), (eb, ed, es) = train, evaluation
    if td != ed:
        return None
    if tb == eb:
        if ts == es:
            return f"{tb}/{td}/{ts} is used for both training and evaluation"
        if tb == "tau2" and {ts, es} & {"base"} and {ts, es} & _TAU2_SPLITS_IN_BASE:
            return f"tau2/{td}/base contains the {({ts, es} - {'base'}).pop()} split"
        return None
    if td in ("retail", "airline"):
        v1_split = ts if tb == "tau1" else es
        if v1_split == "test":
            return (
                f"τ² {td} tasks are revised τ-bench v1 {td} test tasks (most share their gold actions): "
                f"{tb}/{td}/{ts} for training and {eb}/{ed}/{es} for evaluation overlap"
            )
    return None


def write_task_rows(task_set: tuple[str, str, str], path: Path) -> Path:
    benchmark, domain, split = task_set
    backend = get_backend(benchmark)
    refs = backend.task_refs(domain, split)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for i, ref in enumerate(refs):
            full = TaskRef(ref.benchmark, ref.domain, ref.split, ref.task_id, backend.task_dump(ref))
            fh.write(json.dumps(task_row(i, full), ensure_ascii=False) + "\n")
    print(f"wrote {len(refs)} tasks ({benchmark}/{domain}/{split}) to {path}")
    return path


def eval_config_yaml(paths: list[Path]) -> str:
    """slime ``--eval-config`` YAML: one dataset per file, played by our generate function."""
    lines = ["eval:", "  datasets:"]
    for path in paths:
        lines += [
            f"    - name: {path.stem}",
            f"      path: {path.resolve()}",
            "      input_key: index",
            "      metadata_key: metadata",
            "      custom_generate_function_path: slime_tau_plugin.generate.generate",
        ]
    return "\n".join(lines) + "\n"
