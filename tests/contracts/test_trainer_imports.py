"""A trainer's process loads no tool: slime's hooks import nothing under ``slime_tau_plugin.tools``, and neither
does the verl adapter (checked from its source: verl is not installed in the main venv)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "slime_tau_plugin"
TOOLS = "slime_tau_plugin.tools"


def test_slimes_hooks_import_no_tool_module():
    code = (
        "import sys, slime_tau_plugin.generate, slime_tau_plugin.adapters.slime.metrics;"
        f"print(','.join(sorted(m for m in sys.modules if m == {TOOLS!r} or m.startswith({TOOLS + '.'!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_verl_adapter_imports_no_tool_module_even_lazily():
    reached = _package_imports("slime_tau_plugin.adapters.verl.agent_loop")
    assert "slime_tau_plugin.engine.resources" in reached  # the walk follows the engine
    assert sorted(m for m in reached if m == TOOLS or m.startswith(TOOLS + ".")) == []


def _package_imports(start: str) -> set[str]:
    """Every package module ``start`` can reach through any import statement (top level or inside a function)."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        path = _source(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                todo += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        parent = name.rpartition(".")[0]
        if parent:
            todo.append(parent)  # importing a module runs its packages' __init__ first
    return seen


def _source(name: str) -> Path | None:
    if not name.startswith("slime_tau_plugin"):
        return None
    base = PACKAGE.parent.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None
