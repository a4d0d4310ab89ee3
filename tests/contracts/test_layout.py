"""The tests mirror the package, and the CLI's folders import one way (docs/testing.md, "Where tests live").

A test of ``engine/<part>/`` sits in ``tests/engine/<part>/``, of ``adapters/<trainer>/`` in
``tests/adapters/<trainer>/``, of ``tools/<tool>/`` in ``tests/tools/<tool>/``: a folder there that mirrors no package
folder is a test the next reader will not find (a sub-package that moved or a new folder of its own). The CLI's
kinds import downwards only: ``main.py`` -> ``commands/`` -> ``play/`` -> ``views/`` -> ``run_dir/`` (``args.py``
and ``flag_names.py`` beside ``main.py`` are read by all and import none of them).
"""

from __future__ import annotations

import ast
from pathlib import Path

import slime_tau_plugin

PACKAGE = Path(slime_tau_plugin.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
# Folders of tests that mirror no package folder of their own, on purpose.
TEST_ONLY = {"adapters/slime/launch", "engine/envs/tau3"}
CLI_KINDS = ["commands", "play", "views", "run_dir"]
CLI = PACKAGE / "tools" / "cli"


def test_every_test_folder_under_a_layer_mirrors_a_package_folder():
    layers = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    stray = []
    for layer in layers:
        for folder in sorted(p for p in (TESTS / layer).rglob("*") if p.is_dir() and p.name != "__pycache__"):
            rel = folder.relative_to(TESTS).as_posix()
            if not any(rel == t or rel.startswith(t + "/") for t in TEST_ONLY) and not (PACKAGE / rel).is_dir():
                stray.append(rel)
    assert not stray, f"test folders that mirror no package folder: {stray}"


def test_no_test_folder_sorts_by_size():
    """``tests/unit`` and ``tests/integration`` sorted the same code two ways; a test goes beside its code."""
    assert [name for name in ("unit", "integration") if (TESTS / name).exists()] == []


def test_the_clis_kinds_import_downwards_only():
    upward = []
    for kind in CLI_KINDS:
        for module in sorted((CLI / kind).glob("*.py")):
            for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    parts = name.split(".")
                    if parts[:3] != ["slime_tau_plugin", "tools", "cli"] or len(parts) < 4:
                        continue
                    target = parts[3]
                    if target == "main" or (target in CLI_KINDS and CLI_KINDS.index(target) < CLI_KINDS.index(kind)):
                        upward.append(f"{kind}/{module.name} imports {name}")
    assert not upward, upward
    assert sorted(p.stem for p in CLI.glob("*.py")) == ["__init__", "__main__", "args", "flag_names", "main"]
