"""The package's folders are its layers: tools -> adapters -> reporting -> engine, never the other way, no circles.

Read from the source with ``ast`` (every ``import``, at module level or inside a function, plus dotted paths to our
own modules written as strings for lazy loading): a lower layer naming a higher one fails here with the file and the
name, before a slime or verl process ever loads a tool module by accident. The same reading checks "one engine":
every trainer's adapter plays episodes only through the one failure boundary and imports only the engine and the
run-level reporting, and ``import slime_tau_plugin`` loads no trainer library. Each sub-package's "May import" line
says, as a set, what it imports.
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
LAYERS = {"engine": 0, "reporting": 1, "adapters": 2, "tools": 3}
"""From the ground up: the engine plays one episode; ``reporting`` counts many (pass^k, the failure guard, the
per-task history), which adapters and tools read; the engine never imports it."""
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
# Each sub-package's __init__ says which in its "May import: ..." line, compared as a set with what it imports.
ENGINE_FLOORS = (
    ("errors",),
    ("choices",),
    ("shared",),
    ("review",),
    ("episode", "chat", "net"),
    ("envs",),
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


def _may_import(init: Path) -> set[str] | None:
    """The engine units a package's "May import:" paragraph names (``engine.x`` or ``x`` in double backticks, up to
    a "never"); None without such a paragraph."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    start = doc.find("May import:")
    if start < 0:
        return None
    paragraph = doc[start:].split("\n\n", 1)[0].split("never", 1)[0]
    named = {word.removeprefix("engine.") for word in re.findall(r"``([\w.]+)``", paragraph)}
    return named & set(ENGINE_FLOOR)


def _engine_units_imported(package: Path, own: str | None) -> set[str]:
    modules = _sources()
    found = set()
    for path in package.rglob("*.py"):
        for name in _imports(path):
            unit = _engine_unit(_existing(name, modules) or "")
            if unit is not None and unit != own:
                found.add(unit)
    return found


def test_each_may_import_line_names_the_engine_units_its_package_imports():
    """The label is a set a test reads: a unit imported but not named, or named but not imported, fails here."""
    packages = {unit: PACKAGE / "engine" / unit for unit in ENGINE_FLOOR if (PACKAGE / "engine" / unit).is_dir()}
    packages["reporting"] = PACKAGE / "reporting"
    wrong = []
    for unit, package in sorted(packages.items()):
        declared = _may_import(package / "__init__.py")
        if declared is None:
            wrong.append(f"{unit}: its __init__ docstring has no 'May import:' line")
            continue
        real = _engine_units_imported(package, unit if unit in ENGINE_FLOOR else None)
        if declared != real:
            wrong.append(f"{unit}: 'May import' names {sorted(declared)}, it imports {sorted(real)}")
    assert wrong == []


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


# One engine, every trainer: each adapter under adapters/ (slime, verl, trl, and any package added there) plays its
# episodes through the one failure boundary (``engine/loop/boundary.play_episode``, in its process or through the
# worker pools that run it), never a runner below it, and never re-decides what an episode's failure becomes.
EPISODE_DOORS = {
    f"{NAME}.engine.loop.boundary.play_episode",
    f"{NAME}.engine.workers.registry.pool_for",  # a pool's workers call play_episode
}
BELOW_THE_BOUNDARY = {"run_episode", "EpisodeEngine", "TurnLoop", "open_fresh", "failed_result", "LiveEpisode"}
"""What only the boundary may call: the episode runner, its turn loop, and the FAILED result it builds."""
RAISED_THROUGH = {"ConfigError", "MissingSettingError"}
"""The engine's errors a front door may catch: a setting the run must refuse (every other one is an episode's)."""
TRAINERS_ONLY_WHERE_USED = ("trl", "verl", "nemo_gym", "torch", "ray")


def _trainer_packages() -> dict[str, list[Path]]:
    adapters = PACKAGE / "adapters"
    return {p.name: sorted(p.rglob("*.py")) for p in sorted(adapters.iterdir()) if (p / "__init__.py").is_file()}


def _identifiers(node: ast.AST) -> set[str]:
    """Every name and attribute ``node`` mentions (``a.b.c`` -> a, b, c), imported names included."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.alias):
            found |= {sub.asname or "", *sub.name.split(".")}
    return found


def _episode_errors() -> set[str]:
    from slime_tau_plugin.engine import errors

    base = errors.TauPluginError
    return {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, base)} - RAISED_THROUGH


def _catches_more_than_a_refusal(node: ast.Try) -> bool:
    """Whether a ``try`` catches anything but what the boundary raises through (``ConfigError``: a front door may
    answer it its own way, e.g. NeMo Gym's HTTP 400 in one line)."""
    return any(h.type is None or not _identifiers(h.type) <= RAISED_THROUGH for h in node.handlers)


def test_every_trainer_adapter_plays_episodes_only_through_the_one_boundary():
    packages = _trainer_packages()
    assert {"slime", "verl", "trl"} <= set(packages)
    episode_errors, wrong = _episode_errors(), []
    for trainer, paths in packages.items():
        named: set[str] = set()
        for path in paths:
            where = path.relative_to(PACKAGE.parent)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            named |= _imports(path)
            for bad in sorted(_identifiers(tree) & BELOW_THE_BOUNDARY):
                wrong.append(f"{where} names {bad}: episodes go through play_episode")
            for node in ast.walk(tree):
                if isinstance(node, ast.ExceptHandler) and node.type is not None:
                    for bad in sorted(_identifiers(node.type) & episode_errors):
                        wrong.append(f"{where} catches {bad}: the boundary already made it a FAILED episode")
                if isinstance(node, ast.Try) and _catches_more_than_a_refusal(node) and _calls_a_door(node.body):
                    wrong.append(f"{where}:{node.lineno} wraps an episode door in try/except (a second boundary)")
        if not named & EPISODE_DOORS:
            wrong.append(f"adapters/{trainer} reaches no episode door ({', '.join(sorted(EPISODE_DOORS))})")
    assert wrong == []


def _calls_a_door(body: list[ast.stmt]) -> bool:
    doors = {name.rsplit(".", 1)[1] for name in EPISODE_DOORS}
    calls = (n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call))
    return any(_identifiers(call.func) & doors for call in calls)


def test_adapters_import_only_the_engine_the_reporting_and_their_own_package():
    modules, wrong = _sources(), []
    below = (f"{NAME}.engine", f"{NAME}.reporting")
    for trainer, paths in _trainer_packages().items():
        own = f"{NAME}.adapters.{trainer}"
        for path in paths:
            for name in sorted(_imports(path)):
                target = _existing(name, modules) or name
                if not (target.startswith(below) or target == own or target.startswith(f"{own}.")):
                    wrong.append(f"{path.relative_to(PACKAGE.parent)} imports {target}")
    assert wrong == []


def test_import_slime_tau_plugin_loads_no_trainer_at_module_level():
    """What ``import slime_tau_plugin`` (and slime's ``generate`` path) loads, read from the source: no trainer
    library and no torch at module level, whichever of them this venv has installed."""
    modules = _sources()
    seen, todo, heavy = set(), [NAME, f"{NAME}.generate"], []
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = modules[module]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = [*tree.body, *(c for n in tree.body if isinstance(n, ast.If) for c in n.body)]
        for node in nodes:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            heavy += [f"{module}: {n}" for n in names if n.split(".")[0] in TRAINERS_ONLY_WHERE_USED]
        todo += [t for n in _imports(path, module_level_only=True) if (t := _existing(n, modules))]
        parent = module.rsplit(".", 1)[0]
        if parent != module and parent in modules:
            todo.append(parent)  # importing a submodule runs its package's __init__
    assert len(seen) > 20 and heavy == []
