"""Check (and fill) a slime ``--custom-config-path`` YAML for the τ launch scripts (``scripts/lib/tau_launch.sh``).

Two subcommands, both without slime or a GPU:

``render CONFIG [--set NAME=VALUE ...] [--out FILE]``
    Fills ``${NAME}`` placeholders in the YAML's values (the launch script fills ``USER_SIM_BASE_URL`` and
    ``USER_SIM_MODEL_NAME`` with the user-simulator server it starts), loads the result the way slime does
    (``yaml.safe_load``; slime sets every key on ``args``) and builds ``TauConfig.from_args`` from it, so an
    unknown ``tau_*`` key (a typo) or a bad value fails here instead of in the first rollout. Writes the
    filled copy to ``--out`` (comments kept) and prints ``user_sim=local`` when the config points
    ``tau_user_base_url`` at ``${USER_SIM_BASE_URL}`` with ``tau_user: llm`` (the script must start the
    server), else ``user_sim=none``.
``functions DOTTED.PATH ...``
    Imports each ``module.attribute`` path the train command names and prints one line per path that does
    not resolve (exit 1 if any).

Errors are one line on stderr, ``error: FILE: message``, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
USER_SIM_URL_PLACEHOLDER = "${USER_SIM_BASE_URL}"


class RenderError(Exception):
    """A config the launch script must not start with; the message is one line."""


def fill(value: Any, values: dict[str, str], missing: set[str]) -> Any:
    """``value`` with every ``${NAME}`` in its strings replaced; names without a value go to ``missing``."""
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if values.get(name):
                return values[name]
            missing.add(name)
            return match.group(0)

        return PLACEHOLDER.sub(replace, value)
    if isinstance(value, dict):
        return {k: fill(v, values, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, values, missing) for v in value]
    return value


def load_mapping(text: str) -> dict[str, Any]:
    try:
        import yaml
    except ImportError as exc:
        raise RenderError(f"cannot check it: PyYAML is missing for {sys.executable} (pip install pyyaml)") from exc

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RenderError(f"not valid YAML ({one_line(str(exc))})") from exc
    if data is None:
        return {}  # slime treats an empty file as no settings
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise RenderError(f"expected a mapping of setting names to values at the top level; got {type(data).__name__}")
    return data


def render(path: Path, values: dict[str, str], out: Path | None) -> str:
    """Validate ``path`` with ``values`` filled in; returns ``user_sim=local|none``.

    Raises:
        RenderError: unreadable or invalid YAML, a placeholder without a value, or a TauConfig error.
    """
    try:
        from slime_tau_plugin.config import TauConfig
        from slime_tau_plugin.errors import ConfigError
    except ImportError as exc:
        raise RenderError(
            f"cannot check it: slime_tau_plugin does not import here ({exc}); run with the Python that has this "
            f"package and its dependencies installed (PYTHON=..., now {sys.executable})"
        ) from exc
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RenderError(f"cannot read the config ({exc.strerror})") from exc
    raw = load_mapping(text)
    needs_server = raw.get("tau_user") == "llm" and raw.get("tau_user_base_url") == USER_SIM_URL_PLACEHOLDER
    missing: set[str] = set()
    data = fill(raw, values, missing)
    if missing:
        names = ", ".join(f"${{{name}}}" for name in sorted(missing))
        raise RenderError(f"placeholder(s) {names} have no value; the launch script fills {', '.join(sorted(values))}")
    for key in sorted(k for k in data if not k.startswith("tau_")):
        print(f"warning: {path}: key {key!r} is not a tau_* setting; slime sets it on args as is", file=sys.stderr)
    try:
        TauConfig.from_args(SimpleNamespace(**data))
    except (ConfigError, ValueError) as exc:
        raise RenderError(one_line(str(exc))) from exc
    except TypeError as exc:  # TauConfig compares numbers; a string where a number belongs fails there
        raise RenderError(f"a tau_* value has the wrong type ({one_line(str(exc))})") from exc
    if out is not None:
        filled = PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(filled, encoding="utf-8")
    return "user_sim=local" if needs_server else "user_sim=none"


def unresolved(paths: list[str]) -> list[str]:
    """The dotted ``module.attribute`` paths that do not import, each with the reason."""
    problems = []
    for dotted in paths:
        module_name, _, attr = dotted.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any import failure means slime could not load it either
            problems.append(f"{dotted} (import {module_name}: {type(exc).__name__}: {one_line(str(exc))})")
            continue
        if not callable(getattr(module, attr, None)):
            problems.append(f"{dotted} ({module_name} has no function {attr!r})")
    return problems


def one_line(message: str) -> str:
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


def parse_assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_render = sub.add_parser("render", help="fill placeholders, validate into TauConfig, maybe write the copy")
    p_render.add_argument("config", type=Path)
    p_render.add_argument("--set", type=parse_assignment, action="append", default=[], metavar="NAME=VALUE")
    p_render.add_argument("--out", type=Path, default=None)
    p_functions = sub.add_parser("functions", help="check that dotted function paths import")
    p_functions.add_argument("paths", nargs="+")
    ns = parser.parse_args(argv)
    if ns.command == "functions":
        problems = unresolved(ns.paths)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    try:
        print(render(ns.config, dict(ns.set), ns.out))
    except RenderError as exc:
        print(f"error: {ns.config}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
