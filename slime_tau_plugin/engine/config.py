"""``TauConfig``: every knob of the plugin in one frozen dataclass.

Sources, in order of precedence: explicit keyword arguments (CLI), then slime ``args`` attributes
named ``tau_<field>`` (set by slime's ``--custom-config-path`` YAML), then slime's own args
(``rollout_max_context_len``, ``hf_checkpoint``, ``sglang_router_ip``...), then defaults. Only this
module reads ``os.environ`` (for API keys named by ``*_api_key_env``).

The type boundary: every value, from any front door, is checked against its field's type when a
``TauConfig`` is built (:func:`coerce_field`: a quoted number becomes a number, a choice becomes its enum
from ``choices.py``, anything else is a ``ConfigError`` naming the key and the expected type), and every
front door gives the same typo hint for an unknown key (:func:`known_key`). The config is hashable: it
is the key of the process resources (``resources.py``).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import os
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.choices import (
    AgentErrorRule,
    NLAssertionMode,
    PolicyApi,
    RewardMode,
    UserKind,
    parse_choice,
)
from slime_tau_plugin.engine.envs import BENCHMARKS, check_domain
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.limits import EpisodeLimits


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
    user: UserKind = UserKind.SCRIPTED
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
    """Model turns per episode before TRUNCATED (``max_turns``); 30 is τ-bench v1's own ``max_num_steps``."""
    max_errors: int | None = None
    """τ²'s rule: end ``too_many_errors`` (scored 0) after this many tool errors, the agent's and the user's
    tools together (our fed-back parse errors count too); None = the benchmark's (τ²: 10; v1: none); 0 = off."""
    max_steps: int | None = None
    """τ²'s step limit in τ²'s unit (one per agent message, user message and batch of tool answers): end
    ``max_steps`` (scored 0); None = the benchmark's (τ²: 100; v1: none, it has ``max_turns``); 0 = off."""
    agent_error_rule: AgentErrorRule | None = None
    """Which agent turns end ``agent_error`` (scored 0): ``off``, ``empty`` (neither text nor a tool call) or
    ``strict`` (also text with a tool call: ``tau2 run --enforce-communication-protocol``); None = the
    benchmark's (τ²: ``empty``, as ``tau2 run``; v1: ``off``)."""
    max_context_len: int = 32768
    """Prompt + response ids never exceed this; slime's ``rollout_max_context_len`` (else
    ``context_parallel_size * max_tokens_per_gpu``) applies when set, the tighter of the two when both are."""
    max_response_len: int | None = None
    """Optional cap on the whole response (model turns + tool/user text); None = only the context bounds it."""
    max_tokens_per_turn: int | None = None
    """Cap on one generation (the tighter of this and slime's ``max_new_tokens`` = ``--rollout-max-response-len``)."""
    policy_url: str | None = None
    """SGLang server/router base URL; default ``http://{sglang_router_ip}:{sglang_router_port}``."""
    policy_api: PolicyApi = PolicyApi.SGLANG
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
    trust_remote_code: bool = False
    """Let the tokenizer directory run its own Python code (some model families need it); default off, on when
    slime's args carry ``trust_remote_code`` or ``sglang_trust_remote_code`` set to true."""
    env_workers: int = 8
    """Threads that run τ code off the event loop."""
    env_timeout_s: float = 120.0
    """Timeout for one τ call (reset, step, user turn, reward)."""
    record_messages: bool = False
    """Store the chat messages and tool schemas in ``sample.metadata`` (the CLI turns this on)."""
    routing_key_header: bool = False
    """Send ``X-SMG-Routing-Key: session_id`` (on when slime's ``router_policy`` is consistent_hashing)."""
    reward_mode: RewardMode = RewardMode.FAST
    """``fast`` (cached gold outcome; equal to τ's evaluation) or ``reference`` (τ's own evaluation, slow)."""
    nl_assertions: NLAssertionMode = NLAssertionMode.JUDGE
    """τ³ tasks with NL assertions: ``judge`` (ask the judge) or ``exclude`` (drop them; said in metadata)."""
    judge_base_url: str | None = None
    """NL-assertion judge endpoint (OpenAI-compatible); None = τ's default judge model via litellm."""
    judge_model: str | None = None
    judge_api_key_env: str | None = None
    judge_timeout_s: float = 120.0
    """Timeout of one judge request (litellm's ``timeout``)."""
    judge_retries: int = 4
    """litellm's ``num_retries`` for the judge; a judge that still fails ends the episode FAILED."""
    outage_tolerance_s: float = 300.0
    """How long episodes wait for an endpoint (policy, user, judge) that fails every request before its
    breaker opens and its episodes FAIL at once (``endpoints.py``); 0 = fail after the request's own tries."""
    retry_budget: int | None = 16
    """Retries one episode may spend on transient faults, all endpoints together (waiting out an outage is
    not charged); None = only the per-request tries bound them."""
    policy_max_inflight: int | None = None
    """Requests in flight at once to the policy server, for the whole process; None = unbounded."""
    user_max_inflight: int | None = None
    """Requests in flight at once to the LLM user simulator (the wait is not charged to a request's timeout)."""
    judge_max_inflight: int | None = None
    """Rewards scored at once while an NL-assertion judge may be asked; None = unbounded."""
    episode_timeout_s: float | None = None
    """Wall-clock deadline of one episode: past it the episode ends at the next turn boundary (or retry wait)
    as ``deadline``, status TRUNCATED, not trained on; None = no deadline (the launch scripts set one)."""
    max_failed_share: float | None = None
    """Run-level failure guard (``group_filter.guard_settings`` reads and range-checks it): stop once more than
    this share of recent episodes FAILED on one endpoint; None = the guard's default. Listed here so
    ``tau_*`` keys stay one set."""
    failure_window_groups: int | None = None
    """The guard's window in groups; None = slime's ``rollout_batch_size``."""
    reward_shaping: float = 0.0
    """Weight w of τ's partial score in the *training* reward: reward = τ's reward + w * ``partial_score``
    (from ``reward_info``; 0 when absent). Evaluation is never shaped; metadata keeps τ's own reward as
    ``task_reward``, and pass rates always use it."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # the type boundary: a quoted number is coerced or refused here
            object.__setattr__(self, f.name, coerce_field(f.name, getattr(self, f.name)))
        if self.benchmark not in BENCHMARKS:
            raise ConfigError(_expected("tau_benchmark", self.benchmark, BENCHMARKS))
        check_domain(self.benchmark, self.domain)
        if self.user is UserKind.LLM and not (self.user_base_url and self.user_model):
            raise ConfigError(
                "tau_user=llm needs tau_user_base_url (an OpenAI-compatible base URL, e.g. http://host:8000/v1) "
                "and tau_user_model; the API key comes from the environment variable named by tau_user_api_key_env"
            )
        if bool(self.judge_base_url) != bool(self.judge_model):
            raise ConfigError("tau_judge_base_url and tau_judge_model must be set together (or neither)")
        for name in ("max_turns", "max_context_len", "policy_retries", "env_workers", "user_retries", "judge_retries"):
            if getattr(self, name) < 1:
                raise ConfigError(f"tau_{name}={getattr(self, name)!r} is invalid; expected an integer >= 1")
        for name in (
            "max_response_len",
            "max_tokens_per_turn",
            "policy_max_inflight",
            "user_max_inflight",
            "judge_max_inflight",
        ):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"tau_{name}={value!r} is invalid; expected an integer >= 1 or null")
        if self.retry_budget is not None and self.retry_budget < 0:
            raise ConfigError(f"tau_retry_budget={self.retry_budget!r} is invalid; expected an integer >= 0 or null")
        for name in ("max_errors", "max_steps"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"tau_{name}={value!r} is invalid; expected an integer >= 0 (0 = off) or null")
        if self.scripted_user_replies < 0:
            raise ConfigError(f"tau_scripted_user_replies={self.scripted_user_replies!r}; expected >= 0")
        if self.reward_shaping < 0:
            raise ConfigError(f"tau_reward_shaping={self.reward_shaping!r} is invalid; expected a weight >= 0")
        if self.max_failed_share is not None and not 0 < self.max_failed_share <= 1:
            raise ConfigError(
                f"tau_max_failed_share={self.max_failed_share!r} is invalid; expected a share in (0, 1] "
                "(1 = never stop)"
            )
        if self.failure_window_groups is not None and self.failure_window_groups < 1:
            raise ConfigError(
                f"tau_failure_window_groups={self.failure_window_groups!r} is invalid; expected an integer >= 1 or null"
            )
        for name in ("policy_timeout_s", "env_timeout_s", "user_timeout_s", "judge_timeout_s", "episode_timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"tau_{name}={value!r} is invalid; expected seconds > 0")
        if self.outage_tolerance_s < 0:
            raise ConfigError(f"tau_outage_tolerance_s={self.outage_tolerance_s!r} is invalid; expected seconds >= 0")

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
            explicit = None if explicit is None else coerce_field("max_context_len", explicit)
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
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - fields
        if unknown:
            raise ConfigError(f"unknown TauConfig field(s) {sorted(unknown)}; expected some of {cls.field_names()}")
        return cls(**values)

    @property
    def limits(self) -> EpisodeLimits:
        """The harness rules this run applies: each ``tau_*`` key, else the benchmark's own default."""
        spec = BENCHMARKS[self.benchmark]
        errors = spec.max_errors if self.max_errors is None else self.max_errors
        steps = spec.max_steps if self.max_steps is None else self.max_steps
        rule = self.agent_error_rule or AgentErrorRule(spec.agent_error_rule)
        return EpisodeLimits(errors or None, steps or None, rule)

    def user_endpoint(self) -> LLMEndpoint | None:
        """The LLM user's endpoint, or None for the scripted user."""
        if self.user is not UserKind.LLM:
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


def check_tau_keys(args: Any, fields: Iterable[str]) -> None:
    """Refuse ``tau_*`` attributes that are not config keys: a YAML typo must not silently play the default.

    Raises:
        ConfigError: naming the unknown key and the closest valid one.
    """
    names = [name for name in getattr(args, "__dict__", {}) if name.startswith("tau_")]
    for name in sorted(names):
        known_key(name[len("tau_") :], f"{name}", fields, "tau_", "(from --custom-config-path?)")


def known_key(name: str, where: str, fields: Iterable[str], prefix: str, source: str = "") -> str:
    """``name`` if it is a config field; else ConfigError with the one typo hint every front door gives.

    Raises:
        ConfigError: "<where> is not a slime_tau_plugin setting; did you mean <prefix><closest>?".
    """
    fields = sorted(fields)
    if name in fields:
        return name
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    hint = f"did you mean {prefix}{close[0]}?" if close else f"valid keys: {', '.join(prefix + f for f in fields)}"
    raise ConfigError(f"{where} is not a slime_tau_plugin setting{' ' + source if source else ''}; {hint}")


def coerce_field(name: str, value: Any) -> Any:
    """``value`` as field ``name``'s type (``"30"`` -> 30 for an int, ``"fast"`` -> RewardMode.FAST).

    Raises:
        ConfigError: naming ``tau_<name>``, the value and the expected type.
    """
    kind = _field_types()[name]
    if _is_already(kind, value):
        return value
    choice = _enum_of(kind)
    if choice is not None and value is not None:
        return parse_choice(choice, f"tau_{name}", value)
    if isinstance(value, bool):  # pydantic's lax mode reads true as 1: a boolean is never a count or a share
        raise ConfigError(f"tau_{name}={value!r} is invalid; expected {_words(kind)}")
    from pydantic import ValidationError

    try:
        return _adapter(name).validate_python(value)
    except ValidationError:
        raise ConfigError(f"tau_{name}={value!r} is invalid; expected {_words(kind)}") from None


@functools.cache
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TauConfig)


@functools.cache
def _adapter(name: str) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(_field_types()[name])


def _is_already(kind: Any, value: Any) -> bool:
    """``value`` has the field's type as it is (an int counts as a number): nothing to coerce."""
    types = typing.get_args(kind) or (kind,)
    if value is None:
        return type(None) in types
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return any(isinstance(t, type) and type(value) is t for t in types)


def _enum_of(kind: Any) -> type[enum.Enum] | None:
    args = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
    return args[0] if isinstance(args[0], type) and issubclass(args[0], enum.Enum) else None


def _words(kind: Any) -> str:
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
    args = typing.get_args(kind)
    if args:
        return " or ".join("null" if a is type(None) else names.get(a, str(a)) for a in args)
    return names.get(kind, str(kind))


def _slime_context_len(args: Any) -> int | None:
    """slime's whole-sequence bound, as its multi-turn examples compute it; None when slime sets none."""
    if getattr(args, "rollout_max_context_len", None):
        return int(args.rollout_max_context_len)
    cp, per_gpu = getattr(args, "context_parallel_size", None), getattr(args, "max_tokens_per_gpu", None)
    if isinstance(cp, int) and isinstance(per_gpu, int) and cp > 0 and per_gpu > 0:
        return cp * per_gpu
    return None


def env_secret(var_name: str | None) -> str | None:
    """Read an API key from the environment variable the config names (never from config itself)."""
    return os.environ.get(var_name) if var_name else None


def _expected(name: str, value: Any, valid: Any) -> str:
    return f"{name}={value!r} is unknown; expected one of {', '.join(sorted(valid))}"
