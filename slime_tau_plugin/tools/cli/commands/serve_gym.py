"""``slime-tau serve-gym``: serve the τ agent to NeMo Gym (``adapters/nemo_gym``; docs/nemo_gym.md).

With ``--gym-head HOST:PORT`` the agent reads its entry ``--name`` and the model server it names from NeMo Gym's
head server; without, it stands alone and ``--policy-url`` (or ``tau_policy_url`` in ``--tau-config``) is the
policy. Needs ``nemo-gym`` (tested with 0.4.0, Python >= 3.12).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.args import port_number

NEMO_GYM_MODULES = {"nemo_gym", "omegaconf", "fastapi", "uvicorn"}
"""A missing one means NeMo Gym is not installed (one line says so, not a traceback)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve-gym",
        help="serve the τ agent to NeMo Gym (/run, /seed_session, /verify)",
        description="A NeMo Gym agent server whose /run plays one τ episode through the engine and answers "
        "with per-turn token ids, log-probs and τ's reward (docs/nemo_gym.md).",
    )
    d = "(default: %(default)s)"
    p.add_argument("--name", default="tau_agent", help=f"the agent's name in NeMo Gym's config {d}")
    p.add_argument(
        "--gym-head",
        default=None,
        metavar="HOST:PORT",
        help="NeMo Gym's head server: read this agent's entry and its model server from it (default: stand alone)",
    )
    p.add_argument("--host", default=None, help="address to bind (default: the entry's, else 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=None, help="port to listen on (default: the entry's)")
    p.add_argument("--tau-config", default=None, help="YAML file of tau_* settings, as slime's (default: none)")
    p.add_argument("--tokenizer", default=None, help="the policy's tokenizer folder (tau_tokenizer_path)")
    p.add_argument(
        "--policy-url",
        default=None,
        help="generation server (tau_policy_url; default: the base_url of the model server NeMo Gym names)",
    )
    p.add_argument(
        "--policy-api",
        default=None,
        choices=["sglang", "openai-completions", "nemo-rl"],
        help="its protocol (tau_policy_api) (default: sglang with --policy-url)",
    )


def _head(text: str | None) -> tuple[str, int] | None:
    if text is None:
        return None
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--gym-head {text}: expected HOST:PORT")
    return host, int(port)


def _tau_settings(ns: argparse.Namespace) -> dict[str, Any]:
    import yaml

    settings: dict[str, Any] = {}
    if ns.tau_config:
        try:
            loaded = yaml.safe_load(Path(ns.tau_config).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"--tau-config {ns.tau_config}: {' '.join(str(exc).split())}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"--tau-config {ns.tau_config}: expected a mapping of tau_* keys")
        settings.update(loaded)
    for key, value in (("tau_tokenizer_path", ns.tokenizer), ("tau_policy_url", ns.policy_url)):
        if value is not None:
            settings[key] = value
    if ns.policy_api is not None:
        settings["tau_policy_api"] = ns.policy_api
    return settings


def run(ns: argparse.Namespace) -> int:
    try:
        from slime_tau_plugin.adapters.nemo_gym.serve import build_agent, serve
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in NEMO_GYM_MODULES:
            raise
        raise ConfigError(f"NeMo Gym is not installed ({exc}): pip install nemo-gym==0.4.0 (Python >= 3.12)") from None
    if ns.gym_head is None and ns.port is None:
        raise ConfigError("--port is required without --gym-head")
    agent = build_agent(ns.name, head=_head(ns.gym_head), host=ns.host, port=ns.port, tau=_tau_settings(ns))
    config = agent.config
    print(f"serving the τ agent {config.name} to NeMo Gym at http://{config.host}:{config.port}", flush=True)
    serve(agent)
    return 0
