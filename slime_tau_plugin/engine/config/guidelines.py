"""The user simulator's guidelines from a file (``tau_user_guidelines_file``), checked, named and hashed.

τ's simulated customer follows guidelines its authors keep fixing (tau2-bench #182 and #297: do not stop right
after confirming an action; #392: the user-side fixes that took the user-error share of failed retail runs from
26% to 0%). A team applies such a fix without waiting for a τ release, or runs an ablation, by pointing
``tau_user_guidelines_file`` at a file whose text replaces τ's guidelines for the run (``EnvSession.
user_system_prompt``; the task's own instructions are placed as τ places them). Which guidelines ran is part of
every result: :attr:`UserGuidelines.label` (the file's name and a short hash of its text) is in the review's
verdict and in the episode's customer cost, so two runs whose customers differ say so.

Imports only the error tree.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from slime_tau_plugin.engine.errors import ConfigError

__all__ = ["TAU_DEFAULT", "UserGuidelines", "load_guidelines"]

TAU_DEFAULT = "tau"
"""The label of τ's own guidelines (no override)."""
HASH_CHARS = 12


@dataclass(frozen=True, slots=True)
class UserGuidelines:
    """An override of τ's user-simulator guidelines."""

    name: str
    """The file's name (without its folder)."""
    digest: str
    """sha256 of the file's bytes, hex (what ``sha256sum`` prints)."""
    text: str

    @property
    def label(self) -> str:
        """``name@hash``: what the review and the cost report record."""
        return f"{self.name}@{self.digest[:HASH_CHARS]}"


def load_guidelines(path: str, key: str = "tau_user_guidelines_file") -> UserGuidelines:
    """The file's guidelines (read once per path and version of the file).

    Raises:
        ConfigError: one line naming ``key``: the file does not exist, cannot be read, is not UTF-8 text or is
            empty (whitespace only).
    """
    file = Path(os.path.expanduser(path))
    try:
        stat = file.stat()
    except OSError:
        raise ConfigError(f"{key}={path!r} does not exist; expected a text file of user-simulator guidelines") from None
    if not file.is_file():
        raise ConfigError(f"{key}={path!r} is not a file; expected a text file of user-simulator guidelines")
    return _read(str(file.resolve()), stat.st_mtime_ns, stat.st_size, key, path)


@lru_cache(maxsize=16)
def _read(resolved: str, mtime_ns: int, size: int, key: str, shown: str) -> UserGuidelines:
    try:
        data = Path(resolved).read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{key}={shown!r} cannot be read as UTF-8 text: {exc}") from None
    if not text.strip():
        raise ConfigError(f"{key}={shown!r} is empty; expected the user-simulator guidelines to run with")
    return UserGuidelines(Path(resolved).name, hashlib.sha256(data).hexdigest(), text.strip())
