"""``TauConfig``: every knob of the plugin in one frozen dataclass.

Sources, in order of precedence: explicit keyword arguments (CLI), then slime ``args`` attributes
named ``tau_<field>`` (set by slime's ``--custom-config-path`` YAML), then slime's own args
(``rollout_max_context_len``, ``hf_checkpoint``, ``sglang_router_ip``...), then defaults. Only this
module reads ``os.environ`` (for API keys named by ``*_api_key_env``).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

BENCHMARK_DOMAINS: dict[str, tuple[str, ...]] = {
    "tau1": ("airline", "retail"),
    "tau2": ("airline", "retail", "telecom"),
}
USER_SIMULATORS = ("scripted", "llm")
REWARD_MODES = ("fast", "reference")
NL_ASSERTION_MODES = ("judge", "exclude")
POLICY_APIS = ("sglang", "openai-completions")
"""``tau_policy_api`` values: the policy server's wire protocol (``policy_sglang.py``, ``policy_openai.py``)."""


@dataclass(frozen=True, slots=True)
class LLMEndpoint:
    """An OpenAI-compatible chat endpoint (user simulator or NL-assertion judge).

    The API key is never part of config: ``api_key_env`` names the environment variable holding it.
    """

    base_url: str
    """e.g. ``http://127.0.0.1:30001/v1`` (``/chat/completions`` is appended)."""
    model: str
    api_key_env: str | None = None
    timeout_s: float = 60.0
    """Per-request timeout."""
    retries: int = 4
    """Tries per request for connection errors, timeouts, 429 and 5xx."""
    temperature: float = 0.0

    @property
    def api_key(self) -> str | None:
        return env_secret(self.api_key_env)


@dataclass(frozen=True, slots=True)
class TauConfig:
    """Plugin configuration. YAML key = ``tau_`` + field name (e.g. ``tau_domain: airline``)."""

    benchmark: str = "tau2"
    """``tau2`` (τ²/τ³, module ``tau2``) or ``tau1`` (τ-bench v1, module ``tau_bench``)."""
    domain: str = "retail"
    """Default domain when a sample's metadata does not name one."""
    split: str = "train"
    """Default task split when a sample's metadata does not name one."""
    tool_call_parser: str = "qwen25"
    """SGLang ``FunctionCallParser`` name for the policy's tool-call format."""
    reasoning_parser: str | None = None
    """SGLang ``ReasoningParser`` name (e.g. ``qwen3``) for models that think; None = no split."""
    enable_thinking: bool | None = None
    """Passed to the chat template as ``enable_thinking`` when set (Qwen3)."""
    user: str = "scripted"
    """User simulator: ``scripted`` (no LLM) or ``llm`` (an OpenAI-compatible endpoint, ``user_*`` fields)."""
    user_base_url: str | None = None
    """The LLM user's OpenAI-compatible base URL (e.g. ``http://host:port/v1``); required for ``user: llm``."""
    user_model: str | None = None
    """The LLM user's model name as the endpoint knows it."""
    user_api_key_env: str | None = None
    """Name of the environment variable holding the LLM user's API key (the key itself never goes in config)."""
    user_timeout_s: float = 60.0
    """Timeout of one user-simulator request."""
    user_retries: int = 4
    """Tries per user-simulator request (connection errors, timeouts, 429, 5xx) before the episode FAILS."""
    user_temperature: float = 0.0
    scripted_user_replies: int = 0
    """How many times the scripted user answers an agent message before it stops the episode."""
    max_turns: int = 30
    """Model turns per episode before TRUNCATED."""
    max_context_len: int = 32768
    """Prompt + response ids never exceed this; slime's ``rollout_max_context_len`` (else
    ``context_parallel_size * max_tokens_per_gpu``) applies when set, the tighter of the two when both are."""
    max_response_len: int | None = None
    """Optional cap on the whole response (model turns + tool/user text); None = only the context bounds it."""
    max_tokens_per_turn: int | None = None
    """Cap on one generation (the tighter of this and slime's ``max_new_tokens`` = ``--rollout-max-response-len``)."""
    policy_url: str | None = None
    """SGLang server/router base URL; default ``http://{sglang_router_ip}:{sglang_router_port}``."""
    policy_api: str = "sglang"
    """Wire protocol of the policy server: ``sglang`` (native ``/generate``) or ``openai-completions``
    (``/v1/completions`` with a token-id prompt and log-probs: vLLM, or SGLang's OpenAI API)."""
    policy_model: str | None = None
    """Model name an ``openai-completions`` server expects; None leaves it out (the server's only model)."""
    policy_timeout_s: float = 600.0
    """Per-request timeout for ``/generate``."""
    policy_retries: int = 4
    """Tries per ``/generate`` for connection errors, timeouts and 5xx."""
    tokenizer_path: str | None = None
    """Local tokenizer directory; default slime's ``hf_checkpoint``."""
    env_workers: int = 8
    """Threads that run τ code off the event loop."""
    env_timeout_s: float = 120.0
    """Timeout for one τ call (reset, step, user turn, reward)."""
    record_messages: bool = False
    """Store the chat messages and tool schemas in ``sample.metadata`` (the CLI turns this on)."""
    routing_key_header: bool = False
    """Send ``X-SMG-Routing-Key: session_id`` (on when slime's ``router_policy`` is consistent_hashing)."""
    reward_mode: str = "fast"
    """``fast`` (cached gold outcome; equal to τ's evaluation) or ``reference`` (τ's own evaluation, slow)."""
    nl_assertions: str = "judge"
    """τ³ tasks with NL assertions: ``judge`` (ask the judge) or ``exclude`` (drop them; said in metadata)."""
    judge_base_url: str | None = None
    """NL-assertion judge endpoint (OpenAI-compatible); None = τ's default judge model via litellm."""
    judge_model: str | None = None
    judge_api_key_env: str | None = None
    judge_timeout_s: float = 120.0
    """Timeout of one judge request (litellm's ``timeout``)."""
    judge_retries: int = 4
    """litellm's ``num_retries`` for the judge; a judge that still fails ends the episode FAILED."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Backend-specific settings, passed through untouched."""

    def __post_init__(self) -> None:
        if self.benchmark not in BENCHMARK_DOMAINS:
            raise ConfigError(_expected("tau_benchmark", self.benchmark, BENCHMARK_DOMAINS))
        check_domain(self.benchmark, self.domain)
        if self.user not in USER_SIMULATORS:
            raise ConfigError(_expected("tau_user", self.user, USER_SIMULATORS))
        if self.user == "llm" and not (self.user_base_url and self.user_model):
            raise ConfigError(
                "tau_user=llm needs tau_user_base_url (an OpenAI-compatible base URL, e.g. http://host:8000/v1) "
                "and tau_user_model; the API key comes from the environment variable named by tau_user_api_key_env"
            )
        if bool(self.judge_base_url) != bool(self.judge_model):
            raise ConfigError("tau_judge_base_url and tau_judge_model must be set together (or neither)")
        if self.reward_mode not in REWARD_MODES:
            raise ConfigError(_expected("tau_reward_mode", self.reward_mode, REWARD_MODES))
        if self.nl_assertions not in NL_ASSERTION_MODES:
            raise ConfigError(_expected("tau_nl_assertions", self.nl_assertions, NL_ASSERTION_MODES))
        if self.policy_api not in POLICY_APIS:
            raise ConfigError(_expected("tau_policy_api", self.policy_api, POLICY_APIS))
        for name in ("max_turns", "max_context_len", "policy_retries", "env_workers", "user_retries", "judge_retries"):
            if getattr(self, name) < 1:
                raise ConfigError(f"tau_{name}={getattr(self, name)!r} is invalid; expected an integer >= 1")
        for name in ("max_response_len", "max_tokens_per_turn"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"tau_{name}={value!r} is invalid; expected an integer >= 1 or null")
        if self.scripted_user_replies < 0:
            raise ConfigError(f"tau_scripted_user_replies={self.scripted_user_replies!r}; expected >= 0")
        for name in ("policy_timeout_s", "env_timeout_s", "user_timeout_s", "judge_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"tau_{name}={getattr(self, name)!r} is invalid; expected seconds > 0")

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_args(cls, args: Any, **overrides: Any) -> TauConfig:
        """Build from slime's ``args`` (a minimal object is fine: every attribute is optional).

        Budgets follow slime's multi-turn convention (``examples/retool``): slime's
        ``rollout_max_response_len`` is the *per-turn* cap (it arrives as ``sampling_params["max_new_tokens"]``);
        the whole sequence is bounded by ``rollout_max_context_len``, else ``context_parallel_size *
        max_tokens_per_gpu``, else ``tau_max_context_len`` (the tighter one when both are set); the whole
        response is bounded only by an explicit ``tau_max_response_len``.

        Raises:
            ConfigError: a ``tau_*`` attribute is not a known key (the message names the closest one), or a
                value is invalid.
        """
        fields = set(cls.field_names())
        check_tau_keys(args, fields)
        values: dict[str, Any] = {name: getattr(args, f"tau_{name}") for name in fields if hasattr(args, f"tau_{name}")}
        slime_context = _slime_context_len(args)
        if slime_context is not None:
            explicit = values.get("max_context_len")
            values["max_context_len"] = slime_context if explicit is None else min(int(explicit), slime_context)
        if values.get("tokenizer_path") is None and getattr(args, "hf_checkpoint", None):
            values["tokenizer_path"] = args.hf_checkpoint
        if values.get("policy_url") is None and getattr(args, "sglang_router_ip", None):
            values["policy_url"] = f"http://{args.sglang_router_ip}:{args.sglang_router_port}"
        if getattr(args, "router_policy", None) == "consistent_hashing":
            values["routing_key_header"] = True
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - fields
        if unknown:
            raise ConfigError(f"unknown TauConfig field(s) {sorted(unknown)}; expected some of {cls.field_names()}")
        return cls(**values)

    def user_endpoint(self) -> LLMEndpoint | None:
        """The LLM user's endpoint, or None for the scripted user."""
        if self.user != "llm":
            return None
        return LLMEndpoint(
            self.user_base_url or "",
            self.user_model or "",
            self.user_api_key_env,
            self.user_timeout_s,
            self.user_retries,
            self.user_temperature,
        )

    def judge_endpoint(self) -> LLMEndpoint | None:
        """The NL-assertion judge's endpoint, or None for τ's default judge."""
        if not self.judge_base_url:
            return None
        return LLMEndpoint(
            self.judge_base_url,
            self.judge_model or "",
            self.judge_api_key_env,
            self.judge_timeout_s,
            self.judge_retries,
        )

    def replace(self, **changes: Any) -> TauConfig:
        return dataclasses.replace(self, **changes)


def check_tau_keys(args: Any, fields: set[str]) -> None:
    """Refuse ``tau_*`` attributes that are not config keys: a YAML typo must not silently play the default.

    Raises:
        ConfigError: naming the unknown key and the closest valid one.
    """
    names = [name for name in getattr(args, "__dict__", {}) if name.startswith("tau_")]
    for name in sorted(names):
        if name[len("tau_") :] not in fields:
            valid = [f"tau_{f}" for f in sorted(fields)]
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"valid keys: {', '.join(valid)}"
            raise ConfigError(f"{name} is not a slime_tau_plugin setting (from --custom-config-path?); {hint}")


def _slime_context_len(args: Any) -> int | None:
    """slime's whole-sequence bound, as its multi-turn examples compute it; None when slime sets none."""
    if getattr(args, "rollout_max_context_len", None):
        return int(args.rollout_max_context_len)
    cp, per_gpu = getattr(args, "context_parallel_size", None), getattr(args, "max_tokens_per_gpu", None)
    if isinstance(cp, int) and isinstance(per_gpu, int) and cp > 0 and per_gpu > 0:
        return cp * per_gpu
    return None


def check_domain(benchmark: str, domain: str) -> None:
    """Raise ConfigError unless ``domain`` belongs to ``benchmark``."""
    domains = BENCHMARK_DOMAINS.get(benchmark)
    if domains is None:
        raise ConfigError(_expected("benchmark", benchmark, BENCHMARK_DOMAINS))
    if domain not in domains:
        raise ConfigError(_expected(f"domain (benchmark {benchmark})", domain, domains))


def env_secret(var_name: str | None) -> str | None:
    """Read an API key from the environment variable the config names (never from config itself)."""
    return os.environ.get(var_name) if var_name else None


def _expected(name: str, value: Any, valid: Any) -> str:
    return f"{name}={value!r} is unknown; expected one of {', '.join(sorted(valid))}"
