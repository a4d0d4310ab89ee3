"""slime's ``--save-debug-rollout-data`` dumps read back for ``show``, with or without torch.

slime (``slime/observability/rollout_data_utils.py``) writes one file per rollout::

    torch.save({"rollout_id": N, "samples": [Sample.to_dict(), ...]}, template.format(rollout_id=...))

with ``{rollout_id}`` = ``N`` for a training rollout and ``eval_N`` for an evaluation. ``Sample.to_dict``
gives plain Python values (the status as its string), so the zip that ``torch.save`` writes holds one
plain pickle (``<name>/data.pkl``) with no tensor storage in it. That pickle is read here without torch,
by an unpickler that builds only builtin values; a plain pickle of the same dict reads the same way.
A dump that does hold tensors (routing replay's ``rollout_routed_experts``, multimodal inputs) or uses
torch's legacy format needs torch and is read with ``torch.load(weights_only=True)``. Neither way runs code
from the file. Every bad file is a one-line ``ConfigError``.
"""

from __future__ import annotations

import io
import pickle
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.episode.task_ref import task_id_of
from slime_tau_plugin.engine.errors import ConfigError

WHAT = "pass a file slime wrote with --save-debug-rollout-data (e.g. rollout_data/3.pt) or a directory of them"
TORCH_HINT = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
_TORCH_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the first pickle of torch.save's pre-1.6 format
_SAFE = {("collections", "OrderedDict"): dict, ("builtins", "set"): set, ("builtins", "frozenset"): frozenset}
_UNPICKLE_ERRORS = (
    pickle.UnpicklingError,
    EOFError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    MemoryError,
    ImportError,
)
"""What unpickling damaged bytes raises (``pickle`` documents no narrower set)."""


@dataclass(frozen=True, slots=True)
class DumpFile:
    """One dump: its samples as dicts, in slime's order (sample ``i`` is what ``--sample i`` shows)."""

    path: Path
    rollout_id: int | None
    rows: tuple[dict[str, Any], ...]

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, i: int) -> dict[str, Any]:
        return self.rows[i]

    def where(self, i: int) -> str:
        return f"{self.path} sample {i}"


class _NeedsTorchError(Exception):
    """The pickle refers to torch (a tensor, or torch's legacy format)."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds builtin values only; a reference to torch asks for torch, anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE:
            return _SAFE[module, name]
        if module.partition(".")[0] == "torch":
            raise _NeedsTorchError(f"{module}.{name}")
        raise pickle.UnpicklingError(f"it holds a {module}.{name} object, which a slime dump does not")

    def persistent_load(self, pid: Any) -> Any:
        raise _NeedsTorchError("a tensor")


def is_dump_path(path: str | Path) -> bool:
    """A file other than ``.jsonl``, or a directory of ``.pt`` files without ``samples.jsonl``."""
    path = Path(path)
    if path.is_file():
        return path.suffix != ".jsonl"
    return path.is_dir() and not (path / "samples.jsonl").exists() and any(path.glob("*.pt"))


def dump_files(directory: Path) -> list[Path]:
    """The ``.pt`` files of ``directory``: training rollouts by id, then evaluations by id, then the rest."""

    def order(p: Path) -> tuple[int, int, str]:
        stem = p.stem
        if stem.isdigit():
            return 0, int(stem), stem
        if stem.startswith("eval_") and stem[5:].isdigit():
            return 1, int(stem[5:]), stem
        return 2, 0, stem

    return sorted(directory.glob("*.pt"), key=order)


def pick_dump(directory: Path, rollout: str | None) -> Path:
    """``--rollout ID`` (``3`` or ``eval_3``) of ``directory``, else its last training rollout.

    Raises:
        ConfigError: no such dump (the message lists the ids there are).
    """
    files = dump_files(directory)
    if rollout is None:
        training = [p for p in files if p.stem.isdigit()]
        return (training or files)[-1]
    for p in files:
        if p.stem == rollout:
            return p
    listed = ", ".join(p.stem for p in files[:30]) + (f", … ({len(files)} in all)" if len(files) > 30 else "")
    raise ConfigError(f"--rollout {rollout}: no {rollout}.pt in {directory}; its dumps: {listed}")


def read_dump(path: str | Path) -> DumpFile:
    """One dump file, checked.

    Raises:
        ConfigError: missing, unreadable, damaged, not a slime dump, or holding tensors without torch.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} does not exist; {WHAT}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        obj = _PlainUnpickler(io.BytesIO(_payload(path, data))).load()
        if obj == _TORCH_LEGACY_MAGIC:
            raise _NeedsTorchError("torch's legacy format")
    except _NeedsTorchError as exc:
        obj = _torch_load(path, str(exc))
    except _UNPICKLE_ERRORS as exc:
        raise ConfigError(f"{path} is damaged or not a torch.save/pickle file ({_short(exc)}); {WHAT}") from exc
    return _checked(path, obj)


def _payload(path: Path, data: bytes) -> bytes:
    """The pickle inside torch.save's zip (``<name>/data.pkl``), or ``data`` itself when it is not a zip."""
    if not data.startswith(b"PK\x03\x04"):
        return data
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
            if len(names) != 1:
                raise ConfigError(f"{path} is a zip file but not one torch.save wrote (no data.pkl); {WHAT}")
            return archive.read(names[0])
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise ConfigError(f"{path} is a damaged torch.save file (cut off while writing?) ({_short(exc)})") from exc


def _torch_load(path: Path, why: str) -> Any:
    try:
        import torch
    except ImportError:
        raise ConfigError(f"{path} holds {why}, which needs torch to read: {TORCH_HINT}") from None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (*_UNPICKLE_ERRORS, RuntimeError) as exc:
        raise ConfigError(f"torch cannot read {path} ({_short(exc)}); {WHAT}") from exc


def _checked(path: Path, obj: Any) -> DumpFile:
    """The dump's dict as a ``DumpFile``: tensors of the shown fields made lists, trials numbered."""
    if not isinstance(obj, dict) or not isinstance(obj.get("samples"), list):
        kind = f"a dict with keys {sorted(map(str, obj))[:8]}" if isinstance(obj, dict) else type(obj).__name__
        raise ConfigError(f"{path} holds {kind}, not slime's rollout dump ({{'rollout_id', 'samples'}}); {WHAT}")
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(obj["samples"]):
        if not isinstance(row, dict):
            raise ConfigError(f"{path} sample {i} is a {type(row).__name__}, not a Sample.to_dict(); {WHAT}")
        row = {k: v.tolist() if hasattr(v, "tolist") else v for k, v in row.items()}
        meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        if "trial" not in meta:  # slime has no trial: number a task's samples in dump order
            key = str(task_id_of(meta))
            meta = {**meta, "trial": seen.get(key, 0)}
            seen[key] = meta["trial"] + 1
        rows.append({**row, "metadata": meta})
    rollout_id = obj.get("rollout_id")
    return DumpFile(path=path, rollout_id=rollout_id if isinstance(rollout_id, int) else None, rows=tuple(rows))


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160] or type(exc).__name__
