"""TRL's settings -> a ``TauConfig`` and the episode's sampling parameters; the TRL version check.

Settings, lowest precedence first: ``TauConfig`` defaults; the ``tau_*`` keyword arguments of
``TauRollout(...)``; then ``GRPOConfig``'s own limits, as TRL applies them to a single-turn completion: the whole
response (model turns and tool/user text) fits ``max_completion_length`` (``max_response_len``).

The policy, on-policy by default: the trainer's own generation server (``use_vllm=True, vllm_mode="server"``:
``trl vllm-serve`` is vLLM's OpenAI server, and TRL syncs the trained weights into it before each generation). A
server the user names (``tau_policy_url``: SGLang's ``/generate`` or, with ``tau_policy_api: openai-completions``,
vLLM's ``/v1/completions``) gets no weights from TRL, so its episodes are off-policy: refused unless the user says
so (``TauRollout(off_policy=True)``). TRL 1.16 applies its importance-sampling correction (its
``vllm_importance_sampling_*``, from our ``logprobs``) only with ``use_vllm=True``; without it the samples train
uncorrected, which ``off_policy=True`` accepts. The tokenizer defaults to the trainer's
(``processing_class.name_or_path``): the ids the episode holds are the ids TRL trains on. Imports no TRL except
:func:`check_trl_version`, which reads its version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from slime_tau_plugin.engine.choices import PolicyApi
from slime_tau_plugin.engine.config.keys import Trainer
from slime_tau_plugin.engine.config.tau_config import TauConfig, coerce_field, known_key, refuse_unread
from slime_tau_plugin.engine.errors import ConfigError

TRL_VERSION = "1.16.0"
"""The TRL release the tests run (``scripts/test_trl.sh``)."""
TRL_RANGE = ((1, 16, 0), (1, 17, 0))
"""Accepted TRL versions, ``>=1.16.0,<1.17``: ``rollout_func`` is experimental in TRL and changed between minor
releases; a patch release keeps it (PyPI had no later release when this was written)."""
TRL_PIN = "trl>=1.16.0,<1.17"


def check_trl_version(version: str | None = None) -> str:
    """The installed TRL version, if it is in :data:`TRL_RANGE`.

    Raises:
        ConfigError: TRL is missing, or another version is installed (one line: which, and the fix).
    """
    if version is None:
        try:
            import trl
        except ImportError as exc:
            raise ConfigError(f"TRL is not installed: pip install '{TRL_PIN}' ({exc})") from exc
        version = str(trl.__version__)
    if not TRL_RANGE[0] <= _release(version) < TRL_RANGE[1]:
        raise ConfigError(
            f"trl=={version} is installed; slime_tau_plugin's TRL adapter accepts {TRL_PIN} "
            f"(rollout_func is experimental in TRL): pip install '{TRL_PIN}'"
        )
    return version


def _release(version: str) -> tuple[int, int, int]:
    """``1.16.1`` -> (1, 16, 1); a pre-release or local suffix counts as its release; unreadable -> (0, 0, 0)."""
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version.strip())
    if found is None:
        return (0, 0, 0)
    major, minor, patch = found.groups()
    return (int(major), int(minor), int(patch or 0))


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``tau_*`` keyword arguments as TauConfig field values (keys checked now, values when the config is built).

    Raises:
        ConfigError: a key without the ``tau_`` prefix, an unknown one (the closest valid one is named), or one
            TRL does not read (``keys.KEY_READERS``).
    """
    fields = TauConfig.field_names()
    values: dict[str, Any] = {}
    for key, value in settings.items():
        if not key.startswith("tau_"):
            raise ConfigError(f"TauRollout({key}=...) is not a tau_* setting; settings are tau_<name>=value")
        values[known_key(key.removeprefix("tau_"), f"TauRollout key {key}", fields, "tau_")] = value
    refuse_unread(values, Trainer.TRL)
    return values


def trl_tau_config(
    args: Any, settings: Mapping[str, Any], tokenizer_dir: str | None, *, off_policy: bool = False
) -> TauConfig:
    """The ``TauConfig`` one rollout plays with, from our settings and the trainer's ``GRPOConfig`` ``args``.

    Raises:
        ConfigError: a setting or a combination TRL cannot train with, naming the key; a ``tau_policy_url`` TRL
            does not sync weights into without ``off_policy=True``.
    """
    values = check_settings(settings)
    if not values.get("tokenizer_path"):
        if not tokenizer_dir:
            raise ConfigError("tau_tokenizer_path is unset and the trainer's processing_class names no local folder")
        values["tokenizer_path"] = tokenizer_dir
    if not values.get("policy_url"):
        values["policy_url"], values["policy_api"] = _trainer_server(args)
    elif not off_policy and not _is_trainer_server(args, str(values["policy_url"])):
        raise ConfigError(
            f"tau_policy_url={values['policy_url']!r} is a server TRL does not sync weights into, so its episodes "
            "are off-policy (TRL corrects them only with use_vllm=True): train on-policy with use_vllm=True, "
            "vllm_mode='server' and no tau_policy_url, or pass TauRollout(off_policy=True) to train on them anyway"
        )
    if getattr(args, "mask_truncated_completions", False):
        raise ConfigError(
            "GRPOConfig.mask_truncated_completions=True judges a completion by its last id, but a τ episode's "
            "completion can end on tool or user text: set it False (the episode's own mask already holds every cut)"
        )
    total = getattr(args, "max_completion_length", None)
    if total:
        own = values.get("max_response_len")
        values["max_response_len"] = min(int(coerce_field("max_response_len", own)), int(total)) if own else int(total)
    return TauConfig(**values)


def _trainer_server(args: Any) -> tuple[str, PolicyApi]:
    """The trainer's vLLM server (``trl vllm-serve``: vLLM's OpenAI API), when it has one."""
    if not getattr(args, "use_vllm", False):
        raise ConfigError(
            "tau_policy_url is unset and GRPOConfig.use_vllm=False: name the policy server (tau_policy_url=..., "
            "e.g. slime-tau serve --model) or train with use_vllm=True, vllm_mode='server'"
        )
    if getattr(args, "vllm_mode", None) != "server":
        raise ConfigError(
            f"GRPOConfig.vllm_mode={getattr(args, 'vllm_mode', None)!r} runs vLLM inside the trainer, which τ "
            "episodes cannot call turn by turn: use vllm_mode='server' (trl vllm-serve) or set tau_policy_url"
        )
    return _server_url(args), PolicyApi.OPENAI_COMPLETIONS


def _server_url(args: Any) -> str:
    base = getattr(args, "vllm_server_base_url", None)
    url = base or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
    return str(url).rstrip("/")


def _is_trainer_server(args: Any, url: str) -> bool:
    """``tau_policy_url`` names the server TRL syncs (``use_vllm=True, vllm_mode='server'``): still on-policy."""
    synced = getattr(args, "use_vllm", False) and getattr(args, "vllm_mode", None) == "server"
    return bool(synced) and url.rstrip("/") == _server_url(args)


def sampling_params(args: Any, seed: int) -> dict[str, Any]:
    """One episode's sampling parameters from ``GRPOConfig`` (SGLang's names; the OpenAI client renames them)."""
    params: dict[str, Any] = {
        "temperature": float(args.temperature),
        "top_p": float(args.top_p),
        "no_stop_trim": True,
        "skip_special_tokens": False,
        "sampling_seed": seed,
    }
    if getattr(args, "top_k", 0):
        params["top_k"] = int(args.top_k)
    if getattr(args, "min_p", None):
        params["min_p"] = float(args.min_p)
    if getattr(args, "repetition_penalty", 1.0) != 1.0:
        params["repetition_penalty"] = float(args.repetition_penalty)
    return params
