"""Every module a docstring, comment, message, doc or config names exists: labels a test can check.

A name goes stale when a module moves (the flat layout's ``policy_sglang`` became ``engine/policy/sglang.py``); a
stale one in an error message sends a user to a module that is not there. Three kinds are read from the text:
dotted names ``slime_tau_plugin.x.y`` (a module, or a module and a name it defines), paths ``x/y.py`` under the
package, and the old flat layout's module names (:data:`OLD_NAMES`), which must not appear at all.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import slime_tau_plugin

PACKAGE = Path(slime_tau_plugin.__file__).parent
ROOT = PACKAGE.parent
NAME = "slime_tau_plugin"
TEXTS = [
    *PACKAGE.rglob("*.py"),
    *(ROOT / "docs").glob("*.md"),
    *(ROOT / "configs").rglob("*.yaml"),
    *(ROOT / "scripts").rglob("*.*"),
    ROOT / "README.md",
    ROOT / "pyproject.toml",
]
DOTTED = re.compile(r"\bslime_tau_plugin(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[a-z_0-9]+\.py)\b")
OLD_NAMES = (
    "policy_sglang",
    "policy_openai",
    "policy_verl",
    "config_keys",
    "config_fields",
    "config_slime",
    "verl_data",
    "episode_start",
    "episode_state",
    "live_episode",
    "net_stats",
    "server_policies",
    "json_http",
    "runner.EpisodeEngine",
)
"""Module names of the flat layout (and ``runner.EpisodeEngine``, now ``engine/loop/run.py``'s) that no module has."""


@cache
def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


@cache
def defined(path: Path) -> frozenset[str]:
    """The names a module defines or imports at its top level (a dotted name may end in one of them)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


@cache
def _strings(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _defines(path: Path, name: str) -> bool:
    """``name`` is defined at the top level, or built on access by a module ``__getattr__`` that names it (its
    ``__all__`` or a constant holds the string)."""
    return name in defined(path) or ("__getattr__" in defined(path) and name in _strings(path))


def resolves(dotted: str) -> bool:
    """A module, or a module and one name it defines (``a.b.func``, ``a.b.Class.method``: the class is checked)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in modules():
            rest = parts[end:]
            return not rest or _defines(modules()[module], rest[0])
    return False


def path_exists(relative: str) -> bool:
    """``engine/policy/sglang.py``, ``policy/sglang.py`` or ``adapters/slime/metrics.py``: a file under the package
    (from its root or from any folder in it); paths of other trees (``tests/``, ``scripts/``) from the repository."""
    if (ROOT / relative).exists() or (PACKAGE / relative).exists():
        return True
    return any(str(p).endswith("/" + relative) for p in modules().values())


def mentions(pattern: re.Pattern[str]) -> list[tuple[str, int, str]]:
    found = []
    for path in TEXTS:
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            found += [(str(path.relative_to(ROOT)), number, m.group(0)) for m in pattern.finditer(line)]
    return found


def test_every_dotted_name_of_ours_resolves():
    wrong = [f"{f}:{n} {name}" for f, n, name in mentions(DOTTED) if not resolves(name.rstrip("."))]
    assert wrong == []


def ours(relative: str) -> bool:
    """A path into this package: from its root, or from one of its folders (``policy/sglang.py``), but not a
    path of slime's own repository (``slime/ray/rollout.py``, ``tools/convert_hf_to_torch_dist.py``)."""
    first, second = (relative.split("/") + [""])[:2]
    if first == "slime" or (first == "tools" and not (PACKAGE / "tools" / second).exists()):
        return False
    return first in {"engine", "adapters", "reporting", "tools"} or any(
        p.is_dir() and p.name == first for p in PACKAGE.rglob("*")
    )


def test_every_path_under_the_package_exists():
    wrong = [f"{f}:{n} {rel}" for f, n, rel in mentions(PATH) if ours(rel) and not path_exists(rel)]
    assert wrong == []


def test_no_text_names_a_module_of_the_flat_layout():
    basenames = {module.rsplit(".", 1)[-1] for module in modules()}
    assert not {n for n in OLD_NAMES if "." not in n} & basenames, "an old name is a module again: drop it here"
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in OLD_NAMES) + r")\b")
    assert [f"{f}:{n} {name}" for f, n, name in mentions(pattern)] == []


def test_the_scans_find_what_they_look_for():
    """The patterns read the forms the package writes (a check that finds nothing would pass for any text)."""
    assert resolves("slime_tau_plugin.engine.loop.boundary.play_episode")
    assert not resolves("slime_tau_plugin.engine.metrics.summary") and not resolves("slime_tau_plugin.verl_data")
    assert path_exists("engine/policy/sglang.py") and path_exists("policy/sglang.py")
    assert not path_exists("engine/metrics/summary.py") and ours("engine/metrics/summary.py")
    assert not ours("slime/ray/rollout.py") and not ours("tools/convert_hf_to_torch_dist.py")
    assert len(mentions(DOTTED)) > 50 and len(mentions(PATH)) > 50
