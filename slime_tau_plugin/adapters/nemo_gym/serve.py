"""Build and serve a :class:`agent.TauAgent` the way NeMo Gym serves its own servers, without its Ray launcher.

With a head server (``head=(host, port)``, what ``gym env start`` runs), the agent reads NeMo Gym's global
config from it exactly as Gym's own client does (``ServerClient.load_from_global_config``): its own entry under
``name`` (``host``, ``port``, ``model_server``, ``tau``) and the model server it names. Without one it stands
alone: the policy is ``tau_policy_url``. Explicit arguments override the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from pydantic import ValidationError

from slime_tau_plugin.adapters.nemo_gym.agent import TauAgent, TauAgentConfig, server_entry
from slime_tau_plugin.engine.chat.templates import load_tokenizer
from slime_tau_plugin.engine.errors import ConfigError

ENTRYPOINT = "slime_tau_plugin.adapters.nemo_gym.agent"


def build_agent(
    name: str,
    *,
    head: tuple[str, int] | None = None,
    host: str | None = None,
    port: int | None = None,
    tau: Mapping[str, Any] | None = None,
    evaluation: bool | None = None,
    client: ServerClient | None = None,
) -> TauAgent:
    """A ready agent (its episode config built and checked); ``client``: NeMo Gym's, already holding the global
    config (its entry ``name`` is read from it), else the one read from ``head``, else a standalone one.

    Raises:
        ConfigError: the head server cannot be reached or has no entry ``name``, or a setting is wrong.
    """
    entry: dict[str, Any] = {}
    if client is not None:
        entry = server_entry(client.global_config_dict, name)
    elif head is not None:
        head_config = BaseServerConfig(host=head[0], port=head[1])
        try:
            client = ServerClient.load_from_global_config(head_config)
        except Exception as exc:  # requests' errors, or a reply that is not Gym's config
            where = f"{head[0]}:{head[1]}"
            raise ConfigError(f"cannot read NeMo Gym's config from its head server {where}: {exc}") from None
        try:
            entry = server_entry(client.global_config_dict, name)
        except ConfigError:
            raise ConfigError(f"NeMo Gym's config (head server {head[0]}:{head[1]}) has no server {name}") from None
    else:
        head_config = BaseServerConfig(host="127.0.0.1", port=0)
        client = ServerClient(head_server_config=head_config, global_config_dict=OmegaConf.create({}))
    values = {"entrypoint": ENTRYPOINT, "host": "127.0.0.1", **entry, "name": name}
    values["tau"] = {**(values.get("tau") or {}), **(tau or {})}
    for key, value in (("host", host), ("port", port), ("evaluation", evaluation)):
        if value is not None:
            values[key] = value
    try:
        config = TauAgentConfig.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(x) for x in error["loc"])
        raise ConfigError(f"NeMo Gym server {name}: {where}: {error['msg']}") from None
    agent = TauAgent(config=config, server_client=client)
    load_tokenizer(str(agent.tau_config().tokenizer_path))  # a folder that holds none: refused now, not per row
    return agent


def app_of(agent: TauAgent) -> Any:
    """The agent's FastAPI app, set up as NeMo Gym's ``run_webserver`` sets up its servers' apps."""
    app = agent.setup_webserver()
    agent.setup_liveness(app)
    agent.setup_exception_middleware(app)
    return app


def serve_from_environment() -> int:
    """Serve the agent NeMo Gym's launcher started (``python app.py`` in ``responses_api_agents/slime_tau``): its
    name in ``NEMO_GYM_CONFIG_PATH``, the global config in ``NEMO_GYM_CONFIG_DICT`` (what ``RunHelper`` sets);
    a wrong setting is one line on stderr and exit status 2."""
    import os
    import sys

    from nemo_gym.global_config import (
        NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME,
        NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME,
        get_global_config_dict,
    )

    try:
        name = os.environ.get(NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME)
        if not name or not os.environ.get(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME):
            raise ConfigError(
                f"{NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME} and {NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME} are unset: NeMo Gym's "
                "launcher sets them (gym env start, NeMo RL); by hand, use slime-tau serve-gym"
            )
        global_config = get_global_config_dict()
        client = ServerClient(
            head_server_config=ServerClient.load_head_server_config(), global_config_dict=global_config
        )
        agent = build_agent(name, client=client)
    except ConfigError as exc:
        print(f"slime-tau agent: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"serving the τ agent {name} to NeMo Gym at http://{agent.config.host}:{agent.config.port}", flush=True)
    serve(agent)
    return 0


def serve(agent: TauAgent) -> None:
    """Serve until interrupted."""
    import uvicorn

    uvicorn.run(app_of(agent), host=agent.config.host, port=agent.config.port, log_level="warning")
