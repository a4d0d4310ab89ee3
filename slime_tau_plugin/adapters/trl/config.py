"""TRL's settings -> a ``TauConfig`` and the episode's sampling parameters; the TRL version check.

Settings, lowest precedence first: ``TauConfig`` defaults; the ``tau_*`` keyword arguments of
``TauRollout(...)``; then ``GRPOConfig``'s own limits, as TRL applies them to a single-turn completion: the whole
response (model turns and tool/user text) fits ``max_completion_length`` (``max_response_len``). The policy is
the server the user names (``tau_policy_url``, SGLang's ``/generate`` or, with ``tau_policy_api:
openai-completions``, vLLM's ``/v1/completions``), else the trainer's own generation server (``use_vllm=True,
vllm_mode="server"``: ``trl vllm-serve`` is vLLM's OpenAI server). The tokenizer defaults to the trainer's
(``processing_class.name_or_path``): the ids the episode holds are the ids TRL trains on. Imports no TRL except
:func:`check_trl_version`, which reads its version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slime_tau_plugin.engine.choices import PolicyApi
from slime_tau_plugin.engine.config.tau_config import TauConfig, coerce_field, known_key
from slime_tau_plugin.engine.errors import ConfigError

TRL_VERSION = "1.16.0"
"""The TRL release this adapter is tested with: ``rollout_func`` is experimental in TRL and may change."""

SLIME_ONLY = (
    "max_failed_share",
    "failure_window_groups",
    "max_redraws",
    "routing_key_header",
    "task_record_dir",
    "curriculum_window",
    "curriculum_floor",
    "train_window_steps",
)
"""TauConfig fields read only by slime's hooks, router or data source (the per-task record and its curriculum);
under TRL they would do nothing, so they are refused."""


def check_trl_version(version: str | None = None) -> str:
    """The installed TRL version, if it is :data:`TRL_VERSION`.

    Raises:
        ConfigError: TRL is missing, or another version is installed (one line: which, and the fix).
    """
    if version is None:
        try:
            import trl
        except ImportError as exc:
            raise ConfigError(f"TRL is not installed: pip install trl=={TRL_VERSION} ({exc})") from exc
        version = str(trl.__version__)
    if version != TRL_VERSION:
        raise ConfigError(
            f"trl=={version} is installed; slime_tau_plugin's TRL adapter is tested with trl=={TRL_VERSION} only "
            f"(rollout_func is experimental in TRL): pip install trl=={TRL_VERSION}"
        )
    return version


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``tau_*`` keyword arguments as TauConfig field values (keys checked now, values when the config is built).

    Raises:
        ConfigError: a key without the ``tau_`` prefix, an unknown one (the closest valid one is named), or one
            that does nothing under TRL.
    """
    fields = TauConfig.field_names()
    values: dict[str, Any] = {}
    for key, value in settings.items():
        if not key.startswith("tau_"):
            raise ConfigError(f"TauRollout({key}=...) is not a tau_* setting; settings are tau_<name>=value")
        name = known_key(key.removeprefix("tau_"), f"TauRollout key {key}", fields, "tau_")
        if name in SLIME_ONLY:
            raise ConfigError(f"{key}={value!r} is read by slime only and does nothing under TRL; remove it")
        values[name] = value
    return values


def trl_tau_config(args: Any, settings: Mapping[str, Any], tokenizer_dir: str | None) -> TauConfig:
    """The ``TauConfig`` one rollout plays with, from our settings and the trainer's ``GRPOConfig`` ``args``.

    Raises:
        ConfigError: a setting or a combination TRL cannot train with, naming the key.
    """
    values = check_settings(settings)
    if not values.get("tokenizer_path"):
        if not tokenizer_dir:
            raise ConfigError("tau_tokenizer_path is unset and the trainer's processing_class names no local folder")
        values["tokenizer_path"] = tokenizer_dir
    if not values.get("policy_url"):
        values["policy_url"], values["policy_api"] = _trainer_server(args)
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
    base = getattr(args, "vllm_server_base_url", None)
    url = base or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
    return url.rstrip("/"), PolicyApi.OPENAI_COMPLETIONS


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
