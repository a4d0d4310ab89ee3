"""The package's folders are its layers: tools -> adapters -> engine, never the other way, and no circles.

Read from the source with ``ast`` (every ``import``, at module level or inside a function, plus dotted paths to our
own modules written as strings for lazy loading): a lower layer naming a higher one fails here with the file and the
name, before a slime or verl process ever loads a tool module by accident.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import slime_tau_plugin

PACKAGE = Path(slime_tau_plugin.__file__).parent
NAME = "slime_tau_plugin"
LAYERS = {"engine": 0, "adapters": 1, "tools": 2}
FRONT_DOORS = {"__init__", "generate"}  # the package's public surface and the path slime's flag names
DOTTED = re.compile(r"^slime_tau_plugin(?:\.\w+)+")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in FRONT_DOORS:
        return LAYERS["adapters"]  # the front doors re-export an adapter and the engine's public names
    return LAYERS[parts[1]]


def _imports(path: Path, *, module_level_only: bool = False) -> set[str]:
    """Our own modules ``path`` names: import statements, and dotted paths in strings (lazy loaders, registries)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if module_level_only else ast.walk(tree)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.If) and module_level_only:  # `if TYPE_CHECKING:` imports count as arrows too
            found |= {n for child in node.body for n in _names(child)}
        found |= _names(node)
        if not module_level_only and isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = DOTTED.match(node.value.split(":")[0])
            if match:
                found.add(match.group(0))
    return {name for name in found if name.split(".")[0] == NAME}


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return {f"{node.module}.{alias.name}" for alias in node.names}  # a submodule, else resolved to the module
    return set()


def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _existing(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (``a.b.func`` -> ``a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def test_no_module_imports_a_higher_layer_and_adapters_stay_apart():
    modules = _sources()
    wrong = []
    for module, path in sorted(modules.items()):
        for name in sorted(_imports(path)):
            target = _existing(name, modules)
            if target is None or target == NAME:
                continue
            if _layer(target) > _layer(module):
                wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {target} (a higher layer)")
            trainers = {m.split(".")[2] for m in (module, target) if m.startswith(f"{NAME}.adapters.")}
            if len(trainers - {"__init__"}) > 1:
                wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {target} (another trainer's adapter)")
    assert wrong == []


def test_module_level_imports_form_no_circle():
    modules = _sources()
    graph = {
        module: {t for n in _imports(path, module_level_only=True) if (t := _existing(n, modules)) and t != module}
        for module, path in modules.items()
    }
    circles = [scc for scc in _strongly_connected(graph) if len(scc) > 1]
    assert circles == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative enough for a package of a hundred modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_a_trainer_process_loads_no_tool_module():
    """What slime loads (generate and its hooks) and the package itself pull in nothing from ``tools``."""
    slime = ("metrics", "group_filter", "advantages", "all_samples")
    hooks = ", ".join([f"{NAME}.generate", *(f"{NAME}.adapters.slime.{m}" for m in slime)])
    code = f"import sys, {hooks}; print(sorted(m for m in sys.modules if '.tools' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# Inside the engine, its sub-packages (and the few modules directly under engine/) are floors too, from the ground up.
# A floor imports only floors below it (never one beside it or above it), so the sub-packages form no circle either.
# Each sub-package's __init__ says the same in words ("May import: ...").
ENGINE_FLOORS = (
    ("errors",),
    ("choices",),
    ("shared",),
    ("review",),
    ("episode", "chat", "net"),
    ("envs", "metrics"),
    ("config",),
    ("users", "policy", "outcome", "data"),
    ("resources",),
    ("loop",),
    ("workers",),
    ("agent",),
)
ENGINE_FLOOR = {unit: floor for floor, units in enumerate(ENGINE_FLOORS) for unit in units}


def _engine_unit(module: str) -> str | None:
    """The sub-package or module directly under engine/ that ``module`` belongs to (None: not in the engine)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "engine" else None


def test_the_engine_floors_name_every_sub_package_and_module_under_it():
    engine = PACKAGE / "engine"
    units = {
        p.stem if p.is_file() else p.name for p in engine.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert units - {"__init__"} == set(ENGINE_FLOOR)
    assert len([p for p in engine.glob("*.py") if p.stem != "__init__"]) <= 12  # a few modules; the rest in folders
    for unit in ENGINE_FLOOR:
        init = engine / unit / "__init__.py"
        if init.exists():
            assert "May import" in (ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""), unit


def test_engine_sub_packages_import_only_floors_below_them():
    modules = _sources()
    wrong = []
    for module, path in sorted(modules.items()):
        unit = _engine_unit(module)
        if unit is None:
            continue
        for name in sorted(_imports(path)):
            target = _existing(name, modules)
            target_unit = target and _engine_unit(target)
            if target_unit is None or target_unit == unit:
                continue
            if ENGINE_FLOOR[target_unit] >= ENGINE_FLOOR[unit]:
                wrong.append(
                    f"{path.relative_to(PACKAGE.parent)} imports {target} ({unit} may not import {target_unit})"
                )
    assert wrong == []
