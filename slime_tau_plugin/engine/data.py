"""τ tasks <-> task rows: the one row shape every front door reads (slime's JSONL, verl's parquet, the CLI).

No trainer's code here: slime reads a row with ``--input-key index --metadata-key metadata`` and verl's
``adapters/verl/rows.py`` wraps the same metadata in its parquet columns; the engine reads it back
(:func:`task_ref_from_sample`, used by every worker). Row shape (one per task; ``index`` is unique within a
file, the metadata says which task it is)::

    {"index": 7, "metadata": {"benchmark": "tau2", "domain": "retail", "split": "train",
                              "task_id": "7", "task": {...τ's own task dump...}}}

With ``--input-key index`` slime hands the raw ``index`` value to ``generate`` as ``sample.prompt`` and
the ``metadata`` dict as ``sample.metadata``; :func:`task_ref_from_sample` turns them back into a
:class:`TaskRef`. Writing the files (training mixtures, eval sets, slime's eval YAML) is ``task_files.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import TaskRef, check_domain, check_split, get_backend
from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.engine.errors import ConfigError


def task_row(index: int, ref: TaskRef) -> dict[str, Any]:
    """The JSONL row slime reads for one task."""
    metadata: dict[str, Any] = {"benchmark": ref.benchmark, "domain": ref.domain, "split": ref.split}
    metadata[ref.id_key] = ref.task_id
    if ref.task is not None:
        metadata["task"] = ref.task
    return {"index": index, "metadata": metadata}


def metadata_from_name(name: Any, config: TauConfig, what: str) -> dict[str, Any]:
    """The sample metadata for a task named as text, ``BENCHMARK/DOMAIN/SPLIT/TASK_ID`` (a TRL prompt, a NeMo Gym
    row's task; τ-bench v1's TASK_ID is the task index), checked the way the engine will read it.

    Raises:
        ConfigError: ``what`` (the field that held ``name``) is not such text, or names an unknown benchmark or
            task set.
    """
    parts = name.strip().split("/", 3) if isinstance(name, str) else []
    if len(parts) != 4 or not all(parts):
        raise ConfigError(
            f"{what} {str(name)[:80]!r} names no τ task; expected text BENCHMARK/DOMAIN/SPLIT/TASK_ID "
            "(e.g. tau2/retail/train/7, tau1/airline/test/3)"
        )
    benchmark, domain, split, task_id = parts
    key = "task_index" if benchmark == "tau1" else "task_id"
    metadata: dict[str, Any] = {"benchmark": benchmark, "domain": domain, "split": split, key: task_id}
    task_ref_from_sample(None, metadata, config)  # an unknown benchmark/domain is refused here, in one line
    return metadata


def require_benchmark(benchmark: str, config: TauConfig, what: str) -> None:
    """Refuse a task of another benchmark than the config's: the engine plays one benchmark per config, and the
    config's environment would otherwise play its own task of the same id (a silently wrong number).

    Raises:
        ConfigError: ``what`` (the sample, a TRL prompt) names a ``benchmark`` task but ``tau_benchmark`` differs.
    """
    if benchmark != config.benchmark:
        raise ConfigError(
            f"{what} names a {benchmark} task but tau_benchmark is {config.benchmark}: set "
            f"tau_benchmark={benchmark}, or use data prepared for {config.benchmark}"
        )


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
    task_id = task_id_of(metadata)
    if task_id is not None:
        return TaskRef(benchmark, domain, split, task_id, metadata.get("task"))
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


@dataclass(frozen=True, slots=True)
class TaskSet:
    """One τ task list, written ``BENCHMARK/DOMAIN/SPLIT`` on the command line (e.g. ``tau2/retail/test``)."""

    benchmark: str
    domain: str
    split: str

    def __str__(self) -> str:
        return f"{self.benchmark}/{self.domain}/{self.split}"

    @property
    def slug(self) -> str:
        """``tau2_retail_test``: the set's file and slime eval-dataset name."""
        return f"{self.benchmark}_{self.domain}_{self.split}"


def parse_task_sets(spec: str) -> list[TaskSet]:
    """``"tau2/retail,airline/train"`` -> one TaskSet per domain (a comma list names several domains).

    Raises:
        ConfigError: the spec is not BENCHMARK/DOMAIN[,DOMAIN...]/SPLIT, or names an unknown benchmark, domain
            or split (the split as far as τ's files tell without importing τ).
    """
    parts = [part.strip() for part in spec.split("/")]
    domains = [d.strip() for d in parts[1].split(",")] if len(parts) == 3 else []
    if len(parts) != 3 or not (parts[0] and parts[2] and domains and all(domains)):
        raise ConfigError(
            f"task set {spec!r} is malformed; expected BENCHMARK/DOMAIN/SPLIT (DOMAIN may be a comma list), "
            "e.g. tau2/retail/test or tau2/retail,airline/train"
        )
    for domain in domains:
        try:
            check_split(parts[0], domain, parts[2])  # τ's files: no τ import for a typo
        except ConfigError as exc:
            raise ConfigError(f"task set {spec!r}: {exc}") from exc
    return [TaskSet(parts[0], domain, parts[2]) for domain in domains]


_TAU2_SPLITS_IN_BASE = {"train", "test"}
"""τ²'s ``base`` split is train + test."""


def leakage(train: TaskSet, evaluation: TaskSet) -> str | None:
    """Why evaluating on ``evaluation`` after training on ``train`` would leak, or None (rules; no τ needed).

    τ² retail/airline tasks are revised τ-bench v1 *test* tasks (63/74 τ² retail train tasks share their
    gold actions with a v1 test task), so v1 test and any τ² retail/airline split overlap; within one
    benchmark, equal splits overlap and τ²'s ``base`` contains ``train`` and ``test``. Other τ² split
    pairs (telecom's ``full``) are compared by task id once the tasks are loaded (``task_files``).
    """
    tb, td, ts = train.benchmark, train.domain, train.split
    eb, ed, es = evaluation.benchmark, evaluation.domain, evaluation.split
    if td != ed:
        return None
    if tb == eb:
        if ts == es:
            return f"{train} is used for both training and evaluation"
        if tb == "tau2" and {ts, es} & {"base"} and {ts, es} & _TAU2_SPLITS_IN_BASE:
            return f"tau2/{td}/base contains the {({ts, es} - {'base'}).pop()} split"
        return None
    if td in ("retail", "airline"):
        v1_split = ts if tb == "tau1" else es
        if v1_split == "test":
            return (
                f"τ² {td} tasks are revised τ-bench v1 {td} test tasks (most share their gold actions): "
                f"{train} for training and {evaluation} for evaluation overlap"
            )
    return None
