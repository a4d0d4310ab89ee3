"""Check (and fill) a slime ``--custom-config-path`` YAML for the τ launch scripts (``scripts/lib/tau_launch.sh``).

Three subcommands, all without slime or a GPU:

``render CONFIG [--set NAME=VALUE ...] [--merge FILE] [--preflight] [--function DOTTED.PATH ...] [--out FILE]``
    Fills ``${NAME}`` placeholders in the YAML's values (the launch script fills ``USER_SIM_BASE_URL`` and
    ``USER_SIM_MODEL_NAME`` with the user-simulator server it starts), loads the result the way slime does
    (``yaml.safe_load``; slime sets every key on ``args``) and builds ``TauConfig.from_args`` from it, so an
    unknown ``tau_*`` key (a typo) or a bad value fails here instead of in the first rollout. Writes the
    filled copy to ``--out`` (comments kept), with the keys of each ``--merge`` YAML the config does not set
    appended (the launch script merges ``configs/slime/mismatch_metrics.yaml``: slime's TIS helper reads them
    from ``args``). Prints ``user_sim=local`` when the config points ``tau_user_base_url`` at
    ``${USER_SIM_BASE_URL}`` with ``tau_user: llm`` (the script must start the server), ``user_sim=hosted``
    for an LLM user at another address, else ``user_sim=none``. ``--preflight`` checks a hosted user's (and an
    LLM judge's) endpoint: the API-key variable it names is set, and ``GET <base_url>/models`` answers.
    ``--function`` paths that do not import are listed as missing, as ``functions`` does (one process less).
``functions DOTTED.PATH ...``
    Imports each ``module.attribute`` path the train command names and prints one line per path that does
    not resolve (exit 1 if any).
``eval-config --train-data FILE --samples N [--out FILE] SET ...`` / ``eval-config --check FILE --samples N``
    Derives slime's ``--eval-config`` from the current eval sets (``slime-tau prepare`` set specs) and
    ``n_samples_per_eval_prompt`` (each set's rows are the file ``prepare`` writes next to the training file),
    prints ``datasets=NAME,...`` and one ``missing=PATH`` line per rows file not there yet, and writes the YAML
    to ``--out``. ``--check`` refuses a given eval YAML whose datasets say another ``n_samples_per_eval_prompt``.

Errors are one line on stderr, ``error: FILE: message``, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import urllib.error
import urllib.request
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


def render(
    path: Path,
    values: dict[str, str],
    out: Path | None,
    merge: tuple[Path, ...] = (),
    preflight: bool = False,
    functions: tuple[str, ...] = (),
) -> str:
    """Validate ``path`` with ``values`` filled in; returns ``user_sim=local|hosted|none``.

    Raises:
        RenderError: unreadable or invalid YAML, a placeholder without a value, a TauConfig error, or (with
            ``preflight``) a hosted endpoint whose key variable is unset or that does not answer.
    """
    try:
        from slime_tau_plugin.adapters.slime.args import config_from_args
        from slime_tau_plugin.engine.errors import ConfigError
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
        config = config_from_args(SimpleNamespace(**data))
    except (ConfigError, ValueError) as exc:
        raise RenderError(one_line(str(exc))) from exc
    except TypeError as exc:  # TauConfig compares numbers; a string where a number belongs fails there
        raise RenderError(f"a tau_* value has the wrong type ({one_line(str(exc))})") from exc
    problems, missing = run_problems(config)
    missing += [f"function {problem}" for problem in unresolved(list(functions))]  # one process: ~0.5 s less
    if problems:
        raise RenderError("\n".join(problems))
    for piece in missing:  # the launch script lists these with its other missing pieces; a real run stops
        print(f"missing={piece}")
    if missing:
        out = None  # nothing is written while anything is missing
    hosted = raw.get("tau_user") == "llm" and not needs_server
    if preflight:
        if hosted:
            check_endpoint("user", config.user_base_url, config.user_api_key_env)
        if config.judge_base_url:
            check_endpoint("judge", config.judge_base_url, config.judge_api_key_env)
    if out is not None:
        filled = PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
        for extra in merge:
            filled += merged_text(extra, data)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(filled, encoding="utf-8")
    return "user_sim=local" if needs_server else "user_sim=hosted" if hosted else "user_sim=none"


def run_problems(config: Any) -> tuple[list[str], list[str]]:
    """Everything the first ``generate`` would refuse that a valid TauConfig can still hold, all at once:
    ``(problems, missing)``, a wrong value versus a package this Python lacks (a dry run on a machine
    without the GPU image's packages lists those; a real run stops on either).

    TauConfig checks values one at a time; the rollout then also needs SGLang to know the parser names,
    the tokenizer folder to hold a tokenizer, the benchmark to be installed with that domain and split,
    and every endpoint to be an http(s) URL. A dry run that skips these says "valid" for a config whose
    first rollout fails, so each is checked here and every failure is one line.
    """
    from tau_cache import cached

    inputs = {
        "benchmark": config.benchmark,
        "domain": config.domain,
        "split": config.split,
        "parsers": [config.tool_call_parser, config.reasoning_parser],
    }
    found = cached("installed", inputs, lambda: installed_problems(config))
    for note in found["notes"]:
        print(f"note={note}")
    problems: list[str] = list(found["problems"])
    missing: list[str] = list(found["missing"])
    if config.tokenizer_path:
        folder = Path(config.tokenizer_path)
        if not folder.is_dir():
            problems.append(
                f"tau_tokenizer_path={config.tokenizer_path!r} is not a folder; expected a local HF model dir"
            )
        elif not any((folder / name).exists() for name in ("tokenizer.json", "tokenizer_config.json")):
            problems.append(
                f"tau_tokenizer_path={config.tokenizer_path!r} holds no tokenizer.json or tokenizer_config.json"
            )
    for name in ("policy_url", "user_base_url", "judge_base_url"):
        for url in str(getattr(config, name, None) or "").split(","):  # a comma list: one endpoint per node
            if url and not url.strip().startswith(("http://", "https://")):
                problems.append(f"tau_{name}={url!r} is not an http(s) URL; expected e.g. http://host:8000/v1")
    return problems, missing


def installed_problems(config: Any) -> dict[str, list[str]]:
    """What the installed packages say about ``config``: SGLang knows its parser names, the benchmark is
    installed with its domain and split (the expensive part of a dry run: cached by ``tau_cache``)."""
    from slime_tau_plugin.engine.chat.tool_calls import check_parser_names
    from slime_tau_plugin.engine.envs import get_backend
    from slime_tau_plugin.engine.errors import ConfigError

    found: dict[str, list[str]] = {"problems": [], "missing": [], "notes": []}
    try:
        check_parser_names(config.tool_call_parser, config.reasoning_parser)
    except ConfigError as exc:
        if not isinstance(exc.__cause__, ImportError):
            found["problems"].append(one_line(str(exc)))
        else:  # SGLang lives on the GPU image, not necessarily where a dry run is made: say it, do not stop
            found["notes"].append(f"parser names not checked here: {one_line(str(exc))}")
    try:
        get_backend(config.benchmark).task_refs(config.domain, config.split)
    except (ConfigError, ImportError) as exc:
        not_installed = isinstance(exc, ImportError) or isinstance(exc.__cause__, ImportError)
        found["missing" if not_installed else "problems"].append(one_line(str(exc)))
    return found


def merged_text(extra: Path, data: dict[str, Any]) -> str:
    """The lines of ``extra`` (a flat YAML of ``key: value  # comment`` lines) whose key ``data`` lacks."""
    try:
        lines = extra.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RenderError(f"cannot read {extra} ({exc.strerror})") from exc
    keep = [f"\n# appended by the launch script from {extra.name} (keys this config does not set)"]
    for line in lines:
        key = line.split(":", 1)[0].strip()
        if line and not line.startswith((" ", "#")) and key not in data:
            keep.append(line)
    return "\n".join(keep) + "\n" if len(keep) > 1 else ""


def check_endpoint(role: str, base_url: str | None, key_env: str | None) -> None:
    """A hosted OpenAI-compatible endpoint: its key variable is set and ``GET base_url/models`` answers."""
    key = ""
    if key_env:
        key = os.environ.get(key_env, "")
        if not key:
            raise RenderError(
                f"tau_{role}_api_key_env names {key_env}, but {key_env} is not set (or empty) in this "
                f"environment; export {key_env}=<key> before the run (the {role} endpoint is {base_url})"
            )
    for one in (base_url or "").split(","):  # several endpoints (one per node): each must answer
        check_one_endpoint(role, one.strip(), key_env, key)


def check_one_endpoint(role: str, base_url: str, key_env: str | None, key: str) -> None:
    url = f"{base_url.rstrip('/')}/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            json.load(response)
    except urllib.error.HTTPError as exc:
        hint = f" (is {key_env} the right key?)" if exc.code in (401, 403) and key_env else ""
        raise RenderError(f"the hosted {role} endpoint answered HTTP {exc.code} to GET {url}{hint}") from exc
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RenderError(
            f"the hosted {role} endpoint does not answer GET {url} ({one_line(str(reason)) or type(exc).__name__}); "
            f"check tau_{role}_base_url and that the server is up"
        ) from exc


def eval_datasets(train_data: Path, specs: list[str], samples: int) -> tuple[dict[str, Any], list[Path]]:
    """slime's ``--eval-config`` mapping for ``specs`` and the rows files that are not written yet."""
    from slime_tau_plugin.engine.data import parse_task_sets
    from slime_tau_plugin.engine.errors import ConfigError
    from slime_tau_plugin.tools.task_files import WrittenFile, eval_config, eval_file_path

    try:
        sets = [s for spec in specs for s in parse_task_sets(spec)]
    except ConfigError as exc:
        raise RenderError(f"EVAL_SETS: {one_line(str(exc))}") from exc
    files = [WrittenFile(eval_file_path(train_data, s), (s,), 0) for s in sets]
    return eval_config(files, samples), [f.path for f in files if not f.path.exists()]


def check_eval_config(path: Path, samples: int) -> list[str]:
    """The dataset names of a given eval YAML; refuses one whose datasets say another sample count."""
    try:
        data = load_mapping(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RenderError(f"cannot read the eval config ({exc.strerror})") from exc
    datasets = (data.get("eval") or {}).get("datasets") or []
    defaults = (data.get("eval") or {}).get("defaults") or {}
    names, wrong = [], []
    for entry in datasets:
        n = entry.get("n_samples_per_eval_prompt", defaults.get("n_samples_per_eval_prompt", samples))
        names.append(str(entry.get("name")))
        if n != samples:
            wrong.append(f"{entry.get('name')}: {n}")
    if wrong:
        raise RenderError(
            f"its datasets say n_samples_per_eval_prompt {', '.join(wrong)}, but N_SAMPLES_PER_EVAL_PROMPT={samples} "
            "(slime reads the YAML's value first); edit the YAML, or unset EVAL_CONFIG so the script derives it"
        )
    return names


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
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # its no-torch advisory would break one-line errors
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_render = sub.add_parser("render", help="fill placeholders, validate into TauConfig, maybe write the copy")
    p_render.add_argument("config", type=Path)
    p_render.add_argument("--set", type=parse_assignment, action="append", default=[], metavar="NAME=VALUE")
    p_render.add_argument("--out", type=Path, default=None)
    p_render.add_argument("--merge", type=Path, action="append", default=[], metavar="FILE")
    p_render.add_argument("--preflight", action="store_true", help="check a hosted user/judge endpoint")
    p_render.add_argument("--function", action="append", default=[], metavar="DOTTED.PATH", help="must import")
    p_functions = sub.add_parser("functions", help="check that dotted function paths import")
    p_functions.add_argument("paths", nargs="+")
    p_eval = sub.add_parser("eval-config", help="derive (or check) slime's --eval-config")
    p_eval.add_argument("sets", nargs="*", metavar="SET")
    p_eval.add_argument("--train-data", type=Path, default=None)
    p_eval.add_argument("--samples", type=int, required=True)
    p_eval.add_argument("--out", type=Path, default=None)
    p_eval.add_argument("--check", type=Path, default=None, metavar="FILE")
    ns = parser.parse_args(argv)
    if ns.command == "functions":
        problems = unresolved(ns.paths)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    if ns.command == "eval-config":
        return eval_config_command(ns)
    try:
        print(render(ns.config, dict(ns.set), ns.out, tuple(ns.merge), ns.preflight, tuple(ns.function)))
    except RenderError as exc:
        for line in str(exc).splitlines():
            print(f"error: {ns.config}: {line}", file=sys.stderr)
        return 2
    return 0


def eval_config_command(ns: argparse.Namespace) -> int:
    try:
        if ns.check is not None:
            print("datasets=" + ",".join(check_eval_config(ns.check, ns.samples)))
            return 0
        if ns.train_data is None or not ns.sets:
            raise RenderError("eval-config needs --train-data and at least one SET (or --check FILE)")
        config, missing = eval_datasets(ns.train_data, ns.sets, ns.samples)
    except RenderError as exc:
        print(f"error: {ns.check or 'EVAL_SETS'}: {exc}", file=sys.stderr)
        return 2
    print("datasets=" + ",".join(d["name"] for d in config["eval"]["datasets"]))
    for path in missing:
        print(f"missing={path}")
    if ns.out is not None:
        import yaml

        header = (
            "# slime --eval-config, derived by scripts/lib/tau_launch.sh on every run from EVAL_SETS and\n"
            f"# N_SAMPLES_PER_EVAL_PROMPT={ns.samples} (rows written by `slime-tau prepare`); rewritten each run\n"
        )
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
