"""Copy-on-access tables: each episode gets its own database without copying the whole database.

A τ database is a few tables (``orders``, ``users``, ``flights``...) of records keyed by id. Copying a
whole τ² airline database costs ~180 ms; an episode touches a handful of records. A
:class:`CopyOnAccessDict` starts as a shallow copy of the pristine table and clones a record the first
time it is read by key, so writes only ever land on the episode's own copies and ``owned`` lists every
record that may differ from the pristine one (which makes comparing two databases cheap).

Contract: code that mutates a record must fetch it by key (``table[key]``, ``.get``, ``.setdefault``,
``.pop``); iteration (``.values()``, ``.items()``) yields shared records and must only read them. τ's
tools follow this (their searches iterate, their writes look records up by id); the parity tests also
check that the pristine database is unchanged after every write tool has run.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

_MISSING = object()


class CopyOnAccessDict(dict):
    """A table that shares untouched records with a pristine table and owns the ones it handed out."""

    def __init__(self, pristine: dict, clone: Callable[[Any], Any] = copy.deepcopy) -> None:
        super().__init__(pristine)
        self.owned: set = set()
        """Keys whose entry may differ from the pristine table (cloned on access, written or deleted)."""
        self._clone = clone

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self.owned:
            value = self._clone(value)
            dict.__setitem__(self, key, value)
            self.owned.add(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def __setitem__(self, key: Any, value: Any) -> None:
        self.owned.add(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        dict.__delitem__(self, key)
        self.owned.add(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self[key]
        self[key] = default
        return default

    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def popitem(self) -> tuple[Any, Any]:
        key = next(reversed(self.keys()))
        return key, self.pop(key)

    def clear(self) -> None:
        self.owned.update(self.keys())
        dict.clear(self)

    def update(self, other: Any = (), **kwargs: Any) -> None:
        items: Iterable = other.items() if hasattr(other, "items") else other
        for key, value in [*items, *kwargs.items()]:
            self[key] = value

    def copy(self) -> dict:
        return {key: self[key] for key in self}

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickle / deepcopy as a plain dict of this table's current records."""
        return (dict, (), None, None, iter(dict.items(self)))


def copy_on_access_model(pristine: Any) -> Any:
    """A pydantic database whose dict-valued fields are copy-on-access tables over ``pristine``'s.

    Fields that are not dicts are deep-copied (they are small or rarely present).
    """
    update = {
        name: CopyOnAccessDict(value) if isinstance(value, dict) else copy.deepcopy(value)
        for name, value in pristine.__dict__.items()
    }
    return pristine.model_copy(update=update)


def copy_on_access_tables(model: Any) -> dict[str, CopyOnAccessDict] | None:
    """``model``'s copy-on-access tables by field name, or None if any dict field is a plain dict."""
    tables: dict[str, CopyOnAccessDict] = {}
    for name, value in model.__dict__.items():
        if isinstance(value, CopyOnAccessDict):
            tables[name] = value
        elif isinstance(value, dict):
            return None
    return tables


def touched_dump_include(live: Any, gold: Any) -> dict[str, Any] | None:
    """A ``model_dump(include=...)`` spec covering every record where ``live`` and ``gold`` may differ.

    Both must be copy-on-access views of the same pristine database with the same keys; records
    neither of them owns are the shared pristine objects, hence equal. None when that cannot be used
    (different keys, or a plain-dict table), and the caller compares whole databases instead.
    """
    live_tables, gold_tables = copy_on_access_tables(live), copy_on_access_tables(gold)
    if live_tables is None or gold_tables is None or live_tables.keys() != gold_tables.keys():
        return None
    include: dict[str, Any] = {}
    for name, table in live_tables.items():
        other = gold_tables[name]
        if table.keys() != other.keys():
            return None
        include[name] = {key for key in table.owned | other.owned if key in table}
    for name in live.__dict__:
        if name not in live_tables:
            include[name] = True
    return include


def touched_hash(fields: dict[str, Any]) -> str:
    """sha256 of every record an episode touched, table by table, and of the fields that are not tables.

    ``fields``: a database's fields by name (a pydantic model's ``__dict__``, v1's dict of tables). Two
    copy-on-access views of one pristine database that hash the same hold the same data: what neither
    touched is the shared pristine record. τ's whole-database hash costs 0.1-0.6 s per call (it dumps every
    record); this costs what the episode touched. A plain-dict table is hashed whole.
    """
    digest = hashlib.sha256()
    for name in sorted(fields):
        value = fields[name]
        if isinstance(value, CopyOnAccessDict):
            keys = sorted(value.owned, key=str)
            part = [[str(key), _plain(dict.get(value, key, _DELETED))] for key in keys]
        else:
            part = _plain(value)
        digest.update(json.dumps([name, part], sort_keys=True, default=str).encode())
    return digest.hexdigest()


_DELETED = "\x00deleted"


def _plain(value: Any) -> Any:
    """A record as JSON-able data (pydantic models dumped, the rest as it is)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in dict.items(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
