"""Comma-separated names of checks or tags as enum members, refused one line naming the key.

``config.py`` calls :func:`parse_names` while it checks a config, so a misspelt check or tag is refused with the
other bad values. Imports only the error tree.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from slime_tau_plugin.engine.errors import ConfigError

__all__ = ["parse_names"]

E = TypeVar("E", bound=enum.Enum)


def parse_names(value: str | None, kind: type[E], key: str, allowed: tuple[E, ...] | None = None) -> tuple[E, ...]:
    """``"a,b"`` as members of ``kind`` (None: ``allowed``, else every member).

    Raises:
        ConfigError: an unknown name, naming the key and the names it takes.
    """
    every = allowed if allowed is not None else tuple(kind)
    if value is None:
        return every
    names = [part.strip() for part in str(value).split(",") if part.strip()]
    out: list[E] = []
    for name in names:
        member = next((m for m in every if m.value == name), None)
        if member is None:
            expected = ", ".join(str(m.value) for m in every)
            raise ConfigError(f"{key}={value!r} names {name!r}, which is unknown; expected some of {expected}")
        if member not in out:
            out.append(member)
    return tuple(out)
