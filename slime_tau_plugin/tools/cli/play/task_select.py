"""Which tasks a ``rollout`` plays: ``--tasks`` (positions in the split) or ``--task-ids`` (τ's task ids).

Every task is listed once: a repeated position or id (``0,0``, overlapping ranges ``0-3,2-5``) is refused,
because a task played twice would count twice in pass^k. Repeats are ``--samples-per-task``.
"""

from __future__ import annotations

from collections.abc import Sequence

from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.errors import ConfigError


def parse_task_range(spec: str | None, total: int | None) -> list[int]:
    """``"0-9,12"`` -> positions; None -> all. ``total=None`` checks the syntax and repeats only (no τ load).

    Raises:
        ConfigError: malformed or out-of-range specs, or a position listed twice.
    """
    if spec is None:
        return list(range(total or 0))
    picked: list[int] = []
    for part in spec.split(","):
        try:
            lo, dash, hi = part.strip().partition("-")
            start, end = int(lo), int(hi if dash else lo)  # "3-" is malformed, not "3"
        except ValueError as exc:
            raise ConfigError(f"--tasks={spec!r}: expected ranges like 0-9,12") from exc
        if start > end:
            backwards = f"the range {start}-{end} runs backwards"
            raise ConfigError(f"--tasks={spec!r}: {backwards}; write it low-high ({end}-{start})")
        if total is not None and end >= total:
            raise ConfigError(f"--tasks={spec!r}: positions must lie in 0-{total - 1}")
        picked.extend(range(start, end + 1))
    _refuse_repeats("--tasks", spec, [str(p) for p in picked], "position")
    return picked


def parse_task_ids(spec: str) -> list[str]:
    """``"12,7"`` -> ``["12", "7"]``.

    Raises:
        ConfigError: an empty id, or an id listed twice.
    """
    ids = [part.strip() for part in spec.split(",")]
    if not all(ids):
        raise ConfigError(f"--task-ids={spec!r}: expected τ task ids separated by commas, e.g. 0,12")
    _refuse_repeats("--task-ids", spec, ids, "task id")
    return ids


def positions_of_ids(spec: str, refs: Sequence[TaskRef]) -> list[int]:
    """``"12,7"`` (τ task ids, in the given order) -> their positions in ``refs``.

    Raises:
        ConfigError: an empty or unknown id (the message shows some valid ones), or an id listed twice.
    """
    ids = parse_task_ids(spec)
    where = {ref.task_id: i for i, ref in enumerate(refs)}
    unknown = [task_id for task_id in ids if task_id not in where]
    if unknown:
        first = refs[0] if refs else None
        some = ", ".join(ref.task_id for ref in refs[:5])
        name = f"{first.benchmark}/{first.domain}/{first.split}" if first else "this split"
        raise ConfigError(
            f"--task-ids: {', '.join(unknown[:5])} not in {name} ({len(refs)} tasks; the first ids: {some})"
        )
    return [where[task_id] for task_id in ids]


def _refuse_repeats(flag: str, spec: str, items: list[str], what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            raise ConfigError(
                f"{flag}={spec!r} lists {what} {item} more than once; list each task once "
                "(use --samples-per-task N to play a task N times)"
            )
        seen.add(item)


def default_split(benchmark: str, domain: str) -> str:
    """The split a run without ``--split`` plays: ``train``, else the domain's only split (τ²'s mock: ``base``).

    Raises:
        ConfigError: an unknown benchmark or domain, or a domain without ``train`` and with several splits.
    """
    from slime_tau_plugin.engine.envs import check_domain, get_backend, known_splits

    check_domain(benchmark, domain)
    splits = known_splits(benchmark, domain)  # τ's files; τ itself only where they cannot tell
    if splits is None:
        splits = get_backend(benchmark).splits(domain)
    if "train" in splits or not splits:
        return "train"
    if len(splits) == 1:
        return splits[0]
    raise ConfigError(f"--domain {domain} has no train split; pass --split, one of {', '.join(splits)}")
