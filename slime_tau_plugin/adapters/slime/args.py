"""What slime's ``args`` say about ``TauConfig``: its ``tau_*`` attributes and slime's own settings.

slime's ``--custom-config-path`` YAML sets each key as an attribute of ``args`` (``tau_domain``...); slime's own
flags carry the budgets, the router address, the checkpoint and ``trust_remote_code``. Every attribute is
optional: slime's plugin contract tests pass a minimal ``args``. The engine takes the plain ``TauConfig`` this
builds (:func:`config_from_args`); it never reads a trainer's arguments itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from slime_tau_plugin.engine.config.fields import known_key
from slime_tau_plugin.engine.config.tau_config import TauConfig, coerce_field


def config_from_args(args: Any, **overrides: Any) -> TauConfig:
    """The ``TauConfig`` slime's ``args`` describe (a minimal object is fine: every attribute is optional);
    ``overrides`` that are not None win. Budgets follow slime's multi-turn convention (:func:`slime_values`).

    Raises:
        ConfigError: a ``tau_*`` attribute is not a known key (the message names the closest one), or a value is
            invalid.
    """
    values = slime_values(args, TauConfig.field_names(), coerce_field)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return TauConfig(**values)


def slime_values(args: Any, fields: Iterable[str], coerce: Callable[[str, Any], Any]) -> dict[str, Any]:
    """The config values ``args`` holds, slime's own settings folded in (``coerce``: one field's type check).

    Budgets follow slime's multi-turn convention (``examples/retool``): slime's ``rollout_max_response_len`` is
    the *per-turn* cap (it arrives as ``sampling_params["max_new_tokens"]``); the whole sequence is bounded by
    ``rollout_max_context_len``, else ``context_parallel_size * max_tokens_per_gpu``, else
    ``tau_max_context_len`` (the tighter one when both are set); the whole response is bounded only by an
    explicit ``tau_max_response_len``.

    Raises:
        ConfigError: a ``tau_*`` attribute is not a known key (the message names the closest one).
    """
    fields = set(fields)
    check_tau_keys(args, fields)
    values: dict[str, Any] = {name: getattr(args, f"tau_{name}") for name in fields if hasattr(args, f"tau_{name}")}
    slime_context = _slime_context_len(args)
    if slime_context is not None:
        explicit = values.get("max_context_len")
        explicit = None if explicit is None else coerce("max_context_len", explicit)
        values["max_context_len"] = slime_context if explicit is None else min(explicit, slime_context)
    if values.get("tokenizer_path") is None and getattr(args, "hf_checkpoint", None):
        values["tokenizer_path"] = args.hf_checkpoint
    if "trust_remote_code" not in values and any(
        getattr(args, name, None) is True for name in ("trust_remote_code", "sglang_trust_remote_code")
    ):
        values["trust_remote_code"] = True
    if values.get("policy_url") is None and getattr(args, "sglang_router_ip", None):
        values["policy_url"] = f"http://{args.sglang_router_ip}:{args.sglang_router_port}"
    if getattr(args, "router_policy", None) == "consistent_hashing":
        values["routing_key_header"] = True
    return values


def check_tau_keys(args: Any, fields: Iterable[str]) -> None:
    """Refuse ``tau_*`` attributes that are not config keys: a YAML typo must not silently play the default.

    Raises:
        ConfigError: naming the unknown key and the closest valid one.
    """
    names = [name for name in getattr(args, "__dict__", {}) if name.startswith("tau_")]
    for name in sorted(names):
        known_key(name[len("tau_") :], f"{name}", fields, "tau_", "(from --custom-config-path?)")


def _slime_context_len(args: Any) -> int | None:
    """slime's whole-sequence bound, as its multi-turn examples compute it; None when slime sets none."""
    if getattr(args, "rollout_max_context_len", None):
        return int(args.rollout_max_context_len)
    cp, per_gpu = getattr(args, "context_parallel_size", None), getattr(args, "max_tokens_per_gpu", None)
    if isinstance(cp, int) and isinstance(per_gpu, int) and cp > 0 and per_gpu > 0:
        return cp * per_gpu
    return None
