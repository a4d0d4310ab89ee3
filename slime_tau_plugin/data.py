"""τ tasks <-> JSONL rows for slime (``--input-key index --metadata-key metadata``).

Row shape (one per task)::

    {"index": 7, "metadata": {"benchmark": "tau2", "domain": "retail", "split": "train",
                              "task_id": "7", "task": {...τ's own task dump...}}}

With ``--input-key index`` slime hands the raw ``index`` value to ``generate`` as ``sample.prompt`` and
the ``metadata`` dict as ``sample.metadata``; :func:`task_ref_from_sample` turns them back into a
:class:`TaskRef`.
"""

from __future__ import annotations

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
