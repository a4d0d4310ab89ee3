"""τ tasks <-> verl dataset rows (parquet), without importing verl.

One row per task, with the fields verl's ``RLHFDataset`` and agent-loop worker read::

    {"data_source": "tau2_retail",                      # verl groups validation metrics by it
     "prompt": [{"role": "user", "content": "τ task tau2/retail/train/7"}],   # a placeholder: verl
                                                        # needs a chat list; TauAgentLoop builds its own
     "agent_name": "tau_agent",                         # which agent loop plays the row
     "extra_info": {"index": 0, "benchmark": "tau2", "domain": "retail", "split": "train",
                    "task_id": "7",                     # "task_index" for tau1, as in slime's rows
                    "task": "{...τ's own task dump, as JSON text...}",
                    "tau_eval": False}}                 # True in data.val_files' rows (EVAL_MARK)

``extra_info`` carries the same task reference as slime's rows (``data.task_row``), except that the task
dump is JSON *text*: parquet stores a nested dict as a struct whose type is the union over all rows, so
every task would come back with the other tasks' fields set to null (an action's ``arguments`` would
gain other tools' argument names), which changes τ's gold actions. For the same reason
:func:`task_ref_from_extra_info` drops null entries (a file mixing τ² and v1 rows has both ``task_id``
and ``task_index`` columns).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import task_ref_from_sample, task_row
from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.engine.errors import ConfigError

AGENT_NAME = "tau_agent"
"""The name ``TauAgentLoop`` is registered under (``configs/verl/tau_agent_loop.yaml``)."""
EVAL_MARK = "tau_eval"
"""``extra_info`` key, True in an evaluation row: verl does not tell an agent loop whether it validates, so the row
does (what trains only, the customer's shared opening, stays out of validation)."""


def verl_rows(
    refs: Iterable[TaskRef], *, agent_name: str = AGENT_NAME, evaluation: bool = False
) -> list[dict[str, Any]]:
    """verl dataset rows for ``refs``, in order (``extra_info.index`` is the row's position); ``evaluation``: rows
    for ``data.val_files`` (:data:`EVAL_MARK`)."""
    rows = []
    for index, ref in enumerate(refs):
        extra_info: dict[str, Any] = {"index": index, **task_row(index, ref)["metadata"], EVAL_MARK: evaluation}
        if extra_info.get("task") is not None:
            extra_info["task"] = json.dumps(extra_info["task"], ensure_ascii=False, sort_keys=True)
        name = f"{ref.benchmark}/{ref.domain}/{ref.split}/{ref.task_id}"
        rows.append(
            {
                "data_source": f"{ref.benchmark}_{ref.domain}",
                "prompt": [{"role": "user", "content": f"τ task {name}"}],
                "agent_name": agent_name,
                "extra_info": extra_info,
            }
        )
    return rows


def verl_parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    """``rows`` as the parquet file verl's ``data.train_files``/``data.val_files`` name.

    Raises:
        ConfigError: pandas or pyarrow is missing (both ship in every verl image), or there are no rows.
    """
    if not rows:
        raise ConfigError("no verl rows to write; expected at least one task")
    try:
        import pandas as pd
        import pyarrow  # noqa: F401  (pandas' parquet engine)
    except ImportError as exc:
        raise ConfigError(f"writing verl parquet needs pandas and pyarrow: pip install pandas pyarrow ({exc})") from exc
    buffer = io.BytesIO()
    pd.DataFrame(rows).to_parquet(buffer, index=False)
    return buffer.getvalue()


def check_row_sets(file: str, specs: str, what: str) -> None:
    """Refuse a parquet file whose rows come from other task sets than ``specs`` (space-separated
    ``BENCHMARK/DOMAIN[,DOMAIN]/SPLIT``, as the launch script's ``TRAIN_SETS``/``EVAL_SETS``): a file written
    for an earlier choice of sets would otherwise train or evaluate on the wrong tasks without a word.

    Raises:
        ConfigError: the sets differ (both are named), or a spec is malformed.
    """
    import pandas as pd

    from slime_tau_plugin.engine.data import parse_task_sets

    expected = {str(s) for spec in specs.split() for s in parse_task_sets(spec)}
    found = set()
    for info in pd.read_parquet(file, columns=["extra_info"])["extra_info"]:
        info = info or {}
        found.add(f"{info.get('benchmark')}/{info.get('domain')}/{info.get('split')}")
    if found != expected:
        raise ConfigError(
            f"{file} holds rows of {', '.join(sorted(found))} but {what}={specs!r} names "
            f"{', '.join(sorted(expected))}; delete the file (the script writes it again) or set the sets it was "
            "written for"
        )


def is_evaluation(extra_info: Mapping[str, Any] | None) -> bool:
    """Whether a row is an evaluation row (:data:`EVAL_MARK`)."""
    return bool((extra_info or {}).get(EVAL_MARK))


def task_ref_from_extra_info(extra_info: Mapping[str, Any] | None, config: TauConfig) -> TaskRef:
    """Which task a verl row plays (the inverse of :func:`verl_rows`).

    Raises:
        ConfigError: the row names no task, an unknown benchmark/domain, or its task text is not JSON.
    """
    metadata = {k: v for k, v in (extra_info or {}).items() if v is not None}
    task = metadata.get("task")
    if isinstance(task, str):
        try:
            metadata["task"] = json.loads(task)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"extra_info.task is not JSON text ({exc}); rows come from verl_rows()") from exc
    if task_id_of(metadata) is None:
        raise ConfigError(
            "the verl row names no task: expected extra_info with 'task_id' (tau2) or 'task_index' (tau1) "
            f"(rows from slime_tau_plugin.adapters.verl.rows.verl_rows); got extra_info keys {sorted(metadata)}"
        )
    return task_ref_from_sample(None, metadata, config)
