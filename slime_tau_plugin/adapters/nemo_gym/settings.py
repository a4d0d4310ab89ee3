"""NeMo Gym's names -> our engine's: the TauConfig an agent plays with, a row's task, its sampling; no NeMo Gym import.

Settings, lowest precedence first: ``TauConfig`` defaults; the ``tau_*`` keys of the agent's entry in NeMo Gym's
config (``tau: {tau_user: scripted, ...}``, the keys of slime's YAML); the policy. The policy is the generation
server behind the model server NeMo Gym names (``model_server: {type: responses_api_models, name: ...}``): its
``base_url`` (vllm_model's: vLLM's OpenAI server, played through ``/v1/completions`` with token-id prompts, so the
ids stay exact; Gym's own ``/v1/responses`` re-templates each turn and cannot be), or under NeMo RL
(``tau_policy_api: nemo-rl``) every one of its ``base_url``s, played through its chat route with the held ids as
required prefix; unless ``tau_policy_url`` names one (SGLang's ``/generate`` by default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slime_tau_plugin.engine.choices import PolicyApi
from slime_tau_plugin.engine.config.keys import Trainer
from slime_tau_plugin.engine.config.tau_config import TauConfig, known_key, refuse_unread
from slime_tau_plugin.engine.data import metadata_from_name
from slime_tau_plugin.engine.errors import ConfigError


def tau_values(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``tau_*`` keys as TauConfig field values (keys checked now, values when the config is built).

    Raises:
        ConfigError: a key without the ``tau_`` prefix, an unknown one (the closest valid one is named), or one
            NeMo Gym does not read (``keys.KEY_READERS``: slime's hooks, the failure guard, ...).
    """
    fields = TauConfig.field_names()
    values: dict[str, Any] = {}
    for key, value in settings.items():
        if not str(key).startswith("tau_"):
            raise ConfigError(f"{where}: {key} is not a tau_* setting; settings are tau_<name>: value")
        values[known_key(str(key).removeprefix("tau_"), f"{where}: {key}", fields, "tau_")] = value
    refuse_unread(values, Trainer.NEMO_GYM)
    return values


def model_server_policy(
    name: str, entry: Mapping[str, Any], api: PolicyApi | str | None = None
) -> tuple[str, PolicyApi, str | None]:
    """(URL, wire protocol, model name) of the generation servers behind NeMo Gym's model server ``name``.

    ``entry`` is the model server's own config (``<name>.responses_api_models.<type>``); ``api`` the agent's
    ``tau_policy_api`` (default openai-completions: vLLM's own server). Every ``base_url`` is kept (a list, or
    comma-separated: NeMo RL writes one per data-parallel vLLM server), comma-joined for the client.

    Raises:
        ConfigError: it names no ``base_url`` (a model server that only serves Gym's Responses API), or several for
            a protocol whose client plays one server.
    """
    base = entry.get("base_url")
    parts = [str(b) for b in base] if isinstance(base, (list, tuple)) else [str(base)] if base else []
    urls = [u.strip().rstrip("/").removesuffix("/v1") for p in parts for u in p.split(",") if u.strip()]
    if not urls:
        raise ConfigError(
            f"model server {name} names no base_url (the vLLM server behind it): set tau_policy_url to the "
            "generation server (SGLang /generate, or vLLM with tau_policy_api: openai-completions)"
        )
    try:
        protocol = PolicyApi(api) if api else PolicyApi.OPENAI_COMPLETIONS
    except ValueError:
        valid = ", ".join(sorted(p.value for p in PolicyApi))
        raise ConfigError(f"tau_policy_api={api!r} is unknown; expected one of {valid}") from None
    if len(urls) > 1 and protocol is not PolicyApi.NEMO_RL:
        raise ConfigError(
            f"model server {name} lists {len(urls)} base_urls; tau_policy_api: {protocol.value} plays one server: "
            "set tau_policy_api: nemo-rl (NeMo RL's vLLM servers, every one used) or name one in tau_policy_url"
        )
    model = entry.get("model")
    return ",".join(urls), protocol, str(model) if model else None


def agent_config(settings: Mapping[str, Any], policy: tuple[str, PolicyApi, str | None] | None) -> TauConfig:
    """The TauConfig the agent plays every episode with.

    Raises:
        ConfigError: a setting is wrong (one line naming its ``tau_*`` key), or no policy is named.
    """
    values = tau_values(settings, "the agent's tau settings")
    if not values.get("policy_url"):
        if policy is None:
            raise ConfigError("no policy: name a NeMo Gym model server (model_server) or set tau_policy_url")
        values["policy_url"], values["policy_api"], model = policy
        if model and not values.get("policy_model"):
            values["policy_model"] = model
    if not values.get("tokenizer_path"):
        raise ConfigError("tau_tokenizer_path is unset: name the policy's tokenizer folder (the ids it trains on)")
    return TauConfig(**values)


def task_metadata(task: Any, config: TauConfig) -> dict[str, Any]:
    """The engine's sample metadata for a row's ``task``: ``BENCHMARK/DOMAIN/SPLIT/TASK_ID`` text.

    Raises:
        ConfigError: it is not such text, or names an unknown benchmark or task set.
    """
    return metadata_from_name(task, config, "task")


def sampling_params(create_params: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """One episode's sampling parameters (SGLang's names; the OpenAI clients rename them) from the row's
    ``responses_create_params`` (``temperature``, ``top_p``; ``max_output_tokens`` caps each model turn, as Gym's
    own τ² agent passes it as each call's ``max_tokens``) and seed (the row's ``seed``, else
    ``metadata.extra_body.seed``, which NeMo Gym's ``num_repeats_add_seed`` writes).

    Raises:
        ConfigError: ``metadata.extra_body`` is not a JSON object, or ``max_output_tokens`` is not a positive integer.
    """
    temperature = create_params.get("temperature")
    top_p = create_params.get("top_p")
    params: dict[str, Any] = {
        "temperature": 1.0 if temperature is None else float(temperature),
        "top_p": 1.0 if top_p is None else float(top_p),
        "no_stop_trim": True,
        "skip_special_tokens": False,
    }
    max_output = create_params.get("max_output_tokens")
    if max_output is not None:  # NeMo RL writes min(row's, policy.generation.max_new_tokens): a cap on each turn
        if not isinstance(max_output, int) or isinstance(max_output, bool) or max_output < 1:
            raise ConfigError(f"responses_create_params.max_output_tokens={max_output!r}: expected an integer >= 1")
        params["max_new_tokens"] = max_output
    if seed is None:
        extra = (create_params.get("metadata") or {}).get("extra_body")
        try:
            body = json.loads(extra) if extra else {}
        except json.JSONDecodeError as exc:
            raise ConfigError(f"responses_create_params.metadata.extra_body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise ConfigError("responses_create_params.metadata.extra_body is not a JSON object")
        seed = body.get("seed")
    if seed is not None:
        params["sampling_seed"] = int(seed)
    return params
