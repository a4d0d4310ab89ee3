"""Where a ``rollout`` writes, so that nothing is lost or silently replaced.

- Without ``--out`` each run gets a fresh folder ``runs/<YYYYmmdd-HHMMSS>`` and ``runs/latest`` (a symlink)
  is pointed at it when the run starts, so the README's main job can be repeated without flags.
- An existing non-empty ``--out`` is refused unless ``--resume`` (keep its samples, play only the missing
  (task, trial) pairs; with ``--retry-failed`` its FAILED and deadline samples too, moved to ``retried.jsonl``)
  or ``--overwrite`` (delete its ``samples.jsonl`` and ``summary.json`` first). ``--resume`` of a folder that
  does not exist or is empty is refused: there is nothing to resume (a typo would otherwise start a new run).
- ``samples.jsonl`` gets one line per finished episode, flushed at once (:class:`SampleWriter`), so a
  killed run keeps what it finished; ``summary.json`` is replaced atomically.

Nothing is created or deleted before :func:`open_run_dir`, which the CLI calls only after every check passed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.run_dir.run_files import decode_row

RUNS = Path("runs")
LATEST = RUNS / "latest"
SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"
RETRIED = "retried.jsonl"
"""``--resume --retry-failed``: the rows of the samples played again, kept (a sample is never lost)."""


@dataclass(frozen=True, slots=True)
class RunDir:
    """The folder a run writes, decided before anything is written."""

    path: Path
    """Where samples.jsonl and summary.json go."""
    shown: Path
    """How messages name it (``runs/latest`` when that link points at ``path``)."""
    link: Path | None = None
    """A symlink to point at ``path`` when the run starts (``runs/latest`` for the default folder)."""
    overwrite: bool = False
    """Delete the folder's samples.jsonl and summary.json when the run starts (``--overwrite``)."""
    previous: tuple[dict[str, Any], ...] = ()
    """Rows already in samples.jsonl (``--resume``)."""
    keep_bytes: int | None = None
    """``--resume``: cut samples.jsonl to this many bytes first (drops a line cut off by a killed run)."""
    retried: tuple[dict[str, Any], ...] = ()
    """``--resume --retry-failed``: rows to play again; samples.jsonl is rewritten without them."""

    @property
    def samples_path(self) -> Path:
        return self.path / SAMPLES

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY


def choose_run_dir(out: str | None, *, resume: bool, overwrite: bool, retry_failed: bool = False) -> RunDir:
    """Decide where to write; nothing is touched on disk.

    Raises:
        ConfigError: ``--out`` is a file, or a non-empty folder without ``--resume``/``--overwrite``; or
            ``--resume`` of a folder that does not exist or is empty (``runs/latest`` without ``--out``).
    """
    if out is None and resume:
        if not LATEST.exists():
            raise ConfigError(f"--resume: {LATEST} does not exist; pass --out DIR, the folder of the run to continue")
        return _resumed(LATEST.resolve(), LATEST, retry_failed)
    if out is None:
        fresh = _fresh_name()
        return RunDir(fresh, LATEST if not LATEST.exists() or LATEST.is_symlink() else fresh, link=LATEST)
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder (it will hold {SAMPLES} and {SUMMARY})")
    check_creatable(path, "--out")
    has_content = path.is_dir() and any(path.iterdir())
    if resume:
        if not has_content:
            state = "is empty" if path.is_dir() else "does not exist"
            raise ConfigError(
                f"--resume: --out {out} {state}, so there is no run to continue; drop --resume to start a new run "
                "there, or pass the folder of the run to continue"
            )
        return _resumed(path, path, retry_failed)
    if has_content and not overwrite:
        rows = _count_lines(path / SAMPLES)
        held = f"a run ({rows} samples)" if rows is not None else "files"
        raise ConfigError(
            f"--out {out} already holds {held}; pass --resume to continue it, --overwrite to replace it, "
            "or another --out"
        )
    return RunDir(path, path, overwrite=has_content)


def check_creatable(path: Path, flag: str) -> None:
    """Refuse a folder that cannot be created or written, before any server starts.

    The nearest existing ancestor must be a folder we can write in; a throw-away folder is made and
    removed there, because permission bits lie for root and for pseudo file systems (``/sys``, ``/proc``).

    Raises:
        ConfigError: naming ``flag``, the path and why it cannot be used.
    """
    base = path.absolute()
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise ConfigError(f"{flag} {path}: {base} is a file, not a folder; pass a folder path")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".slime-tau-probe-", dir=base))
    except OSError as exc:
        raise ConfigError(
            f"{flag} {path}: cannot create a folder under {base} ({exc.strerror or exc}); pass a writable folder"
        ) from exc


def open_run_dir(run: RunDir) -> None:
    """Create the folder, apply ``--overwrite``/``--resume`` and point ``runs/latest`` at it.

    Raises:
        ConfigError: the folder cannot be created or written after all (it changed since the check).
    """
    try:
        _open(run)
    except OSError as exc:
        raise ConfigError(f"--out {run.shown}: {exc.strerror or exc}; pass a writable folder") from exc


def _open(run: RunDir) -> None:
    run.path.mkdir(parents=True, exist_ok=True)
    if run.overwrite:
        for name in (SAMPLES, SUMMARY):
            (run.path / name).unlink(missing_ok=True)
    if run.retried:
        with (run.path / RETRIED).open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in run.retried)
        tmp = run.samples_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in run.previous), encoding="utf-8")
        os.replace(tmp, run.samples_path)
    elif run.keep_bytes is not None:
        with run.samples_path.open("r+b") as fh:
            fh.truncate(run.keep_bytes)
            if run.keep_bytes:
                fh.seek(run.keep_bytes - 1)
                if fh.read(1) != b"\n":  # a complete last row without its newline
                    fh.write(b"\n")
    if run.link is not None:
        _point_link(run.link, run.path)


def discard_unplayed(run: RunDir) -> None:
    """Remove what a run that stopped before its first sample wrote (a refused setting found by an episode), so
    the corrected command can use the same ``--out``: a folder in state ``running`` with no sample would be refused.
    A resumed run's folder is left as it is (``--resume`` continues it)."""
    if run.previous or run.retried:
        return
    try:
        if run.samples_path.exists() and run.samples_path.stat().st_size == 0:
            run.samples_path.unlink()
        run.summary_path.unlink(missing_ok=True)
        if not any(run.path.iterdir()):
            run.path.rmdir()
    except OSError:
        pass  # best effort: the error being raised is the one to show


class SampleWriter:
    """Appends one JSON line per finished sample to samples.jsonl and flushes it at once."""

    def __init__(self, path: Path) -> None:
        self._fh = path.open("a", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def write_summary(run: RunDir, summary: dict[str, Any]) -> None:
    """Replace summary.json atomically (a reader never sees half of it)."""
    tmp = run.summary_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, run.summary_path)


def read_previous_summary(run: RunDir) -> dict[str, Any] | None:
    """The summary.json of the run being resumed, or None if it has none (or an unreadable one)."""
    try:
        summary = json.loads(run.summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def is_retryable(row: dict[str, Any]) -> bool:
    """A row ``--retry-failed`` plays again: FAILED, or ended by its deadline (no evidence about the model)."""
    return row.get("status") == "failed" or row["metadata"].get("termination_reason") == "deadline"


def _resumed(path: Path, shown: Path, retry_failed: bool = False) -> RunDir:
    samples = path / SAMPLES
    if not samples.exists():
        return RunDir(path, shown)
    data = samples.read_bytes()
    rows: list[dict[str, Any]] = []
    keep = 0
    offset = 0
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        end = offset + len(line) + (1 if number < len(lines) else 0)
        if line.strip():
            row = decode_row(line)
            if row is None or not isinstance(row.get("metadata"), dict):
                if number == len(lines) and row is None:  # cut off by a killed run: dropped, then played again
                    print(f"--resume: dropping the cut-off last line of {samples}", file=sys.stderr)
                    break
                raise ConfigError(
                    f"--resume: {samples} line {number} is not a rollout sample row; "
                    "fix or remove that line, or use --overwrite"
                )
            rows.append(row)
        keep = end
        offset = end
    if retry_failed:
        retried = tuple(row for row in rows if is_retryable(row))
        kept = tuple(row for row in rows if not is_retryable(row))
        return RunDir(path, shown, previous=kept, keep_bytes=keep, retried=retried)
    return RunDir(path, shown, previous=tuple(rows), keep_bytes=keep)


def _fresh_name() -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = RUNS / stamp, 1
    while path.exists() or path.is_symlink():
        n += 1
        path = RUNS / f"{stamp}-{n}"
    return path


def _point_link(link: Path, target: Path) -> None:
    if link.exists() and not link.is_symlink():
        print(
            f"note: {link} is a folder from an earlier version, left as it is; this run is in {target} "
            f"(remove {link} and later runs will keep {link} pointing at the newest one)",
            file=sys.stderr,
        )
        return
    tmp = link.with_name(f".{link.name}.tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(os.path.relpath(target, link.parent))
    os.replace(tmp, link)


def _count_lines(path: Path) -> int | None:
    try:
        return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())
    except OSError:
        return None
