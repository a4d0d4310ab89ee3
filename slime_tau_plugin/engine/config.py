"""``TauConfig``: every knob of the plugin in one frozen pydantic model; each key declared once.

Sources, in order of precedence: explicit keyword arguments (CLI), then slime ``args`` attributes
named ``tau_<field>`` (set by slime's ``--custom-config-path`` YAML), then slime's own args
(``rollout_max_context_len``, ``hf_checkpoint``, ``sglang_router_ip``...), then defaults. Only this
module reads ``os.environ`` (for API keys named by ``*_api_key_env``).

The type boundary: each field's name, type, default, range and help text are its declaration below
(``config_fields.setting``); pydantic checks every value from any front door (a quoted number becomes a
number, a choice becomes its enum from ``choices.py``, unknown keys are refused) and a refusal is one
``ConfigError`` line naming the key as that front door spells it (``tau_<field>``, or the CLI's flag:
:meth:`TauConfig.from_values`). The CLI generates its ``rollout`` flags from these fields. The config is
hashable and equal by value: it is the key of the process resources (``resources.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from slime_tau_plugin.engine import config_fields as cf
from slime_tau_plugin.engine.choices import AgentErrorRule, NLAssertionMode, PolicyApi, RewardMode, UserKind
from slime_tau_plugin.engine.config_fields import known_key, setting
from slime_tau_plugin.engine.config_slime import slime_values
from slime_tau_plugin.engine.envs import BENCHMARKS, check_domain
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.limits import EpisodeLimits

__all__ = ["LLMEndpoint", "TauConfig", "coerce_field", "env_secret", "known_key"]

Benchmark = Literal[tuple(BENCHMARKS)]  # type: ignore[valid-type]  # the table's names: tau2, tau1


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


class TauConfig(BaseModel):
    """Plugin configuration. YAML key = ``tau_`` + field name (e.g. ``tau_domain: airline``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    benchmark: Benchmark = setting(
        "tau2", "τ version: tau2 (τ²/τ³, module tau2) or tau1 (τ-bench v1, module tau_bench)"
    )
    domain: str = setting("retail", "τ domain when a sample names none: airline, retail or telecom (τ² only)")
    split: str = setting("train", "task split when a sample names none, e.g. train, test, base")
    tool_call_parser: str = setting("qwen25", "SGLang FunctionCallParser name of the policy's tool-call format")
    reasoning_parser: str | None = setting(
        None, "SGLang ReasoningParser name, e.g. qwen3, for models that think (default: none, no split)"
    )
    enable_thinking: bool | None = setting(None, "passed to the chat template as enable_thinking when set (Qwen3)")
    user: UserKind = setting(
        UserKind.SCRIPTED, "user simulator: scripted (no LLM) or llm (τ's simulator on an OpenAI-compatible endpoint)"
    )
    user_base_url: str | None = setting(None, "the LLM user's OpenAI-compatible base URL, …/v1 (the llm user needs it)")
    user_model: str | None = setting(None, "the LLM user's model name at that endpoint (default: none)")
    user_api_key_env: str | None = setting(
        None, "NAME of the environment variable holding the LLM user's API key, never the key (default: no key)"
    )
    user_timeout_s: float = setting(60.0, "timeout of one user-simulator request", gt=0, noun="seconds")
    user_retries: int = setting(
        4, "tries per user-simulator request (connection errors, timeouts, 429, 5xx) before the episode FAILS", ge=1
    )
    user_temperature: float = setting(
        0.0, "the LLM user model's temperature; each episode also sends a seed, its sampling_seed", ge=0
    )
    scripted_user_replies: int = setting(
        0, "how many times the scripted user answers an agent message before it stops the episode", ge=0
    )
    scripted_user_ticket: bool = setting(
        False,
        "the scripted user's opening names the task id ((Ticket: ID)): only the built-in oracle policy needs it "
        "(the CLI turns it on when it starts that server); never on for training prompts",
    )
    max_turns: int = setting(30, "model turns before TRUNCATED (30 is τ-bench v1's own max_num_steps)", ge=1)
    max_errors: int | None = setting(
        None,
        "end too_many_errors (scored 0) after N tool errors, the agent's and the user's together, fed-back parse "
        "errors included (default: τ²'s 10; τ-bench v1: off; 0 = off)",
        ge=0,
        note="(0 = off)",
    )
    max_steps: int | None = setting(
        None,
        "end max_steps (scored 0) after N steps in τ²'s unit (one per agent message, user message and batch of "
        "tool answers) (default: τ²'s 100; τ-bench v1: off, max turns bound it; 0 = off)",
        ge=0,
        note="(0 = off)",
    )
    agent_error_rule: AgentErrorRule | None = setting(
        None,
        "end agent_error (scored 0) on an agent turn with neither text nor a tool call (empty), or also on text "
        "sent with a tool call (strict, as tau2 run --enforce-communication-protocol) (default: τ²: empty; v1: off)",
    )
    max_context_len: int = setting(
        32768,
        "cap on prompt + response; slime's rollout_max_context_len (else context_parallel_size * "
        "max_tokens_per_gpu) applies when set, the tighter of the two when both are",
        ge=1,
    )
    max_response_len: int | None = setting(
        None, "cap on the whole response (model turns + tool/user text); None = only the context bounds it", ge=1
    )
    max_tokens_per_turn: int | None = setting(
        None, "cap on one generation (the tighter of this and slime's max_new_tokens)", ge=1
    )
    policy_url: str | None = setting(None, "SGLang server/router URL; default http://{sglang_router_ip}:{port}")
    policy_api: PolicyApi = setting(
        PolicyApi.SGLANG,
        "how to talk to the policy server: sglang (native /generate) or openai-completions (/v1/completions with "
        "token-id prompts and log-probs, as vLLM serves it)",
    )
    policy_model: str | None = setting(
        None, "openai-completions: the model name the server knows (default: none sent; vLLM uses its only model)"
    )
    policy_timeout_s: float = setting(600.0, "per-request timeout for /generate", gt=0, noun="seconds")
    policy_retries: int = setting(4, "tries per /generate for connection errors, timeouts and 5xx", ge=1)
    tokenizer_path: str | None = setting(None, "local tokenizer directory; default slime's hf_checkpoint")
    trust_remote_code: bool = setting(
        False,
        "let the tokenizer directory run its own Python code (some model families need it); on when slime's "
        "args carry trust_remote_code or sglang_trust_remote_code set to true",
    )
    env_workers: int = setting(8, "threads that run τ code off the event loop", ge=1)
    env_timeout_s: float = setting(
        120.0, "timeout of one τ call (reset, step, user turn, reward)", gt=0, noun="seconds"
    )
    record_messages: bool = setting(False, "store chat messages and tool schemas in sample.metadata (the CLI does)")
    routing_key_header: bool = setting(
        False, "send X-SMG-Routing-Key: session_id (on when slime's router_policy is consistent_hashing)"
    )
    reward_mode: RewardMode = setting(
        RewardMode.FAST, "fast (cached gold outcome, equal to τ's evaluation) or reference (τ's own evaluation, slow)"
    )
    nl_assertions: NLAssertionMode = setting(
        NLAssertionMode.JUDGE,
        "τ³ tasks with NL assertions: ask the judge, or exclude them from the reward (said in metadata)",
    )
    judge_base_url: str | None = setting(None, "NL-assertion judge URL, OpenAI-compatible (default: τ's own judge)")
    judge_model: str | None = setting(None, "judge model name (default: τ's own)")
    judge_api_key_env: str | None = setting(None, "NAME of the judge key's environment variable (default: none)")
    judge_timeout_s: float = setting(120.0, "seconds per judge request (litellm's timeout)", gt=0, noun="seconds")
    judge_retries: int = setting(
        4, "tries per judge call (litellm's num_retries); a judge that still fails ends the episode FAILED", ge=1
    )
    outage_tolerance_s: float = setting(
        300.0,
        "how long episodes wait for a policy/user/judge endpoint that answered before and now fails every "
        "request, before they FAIL naming it (0 = fail after each request's own tries)",
        ge=0,
        noun="seconds",
    )
    retry_budget: int | None = setting(
        16,
        "retries one episode may spend on transient faults, all endpoints together (waiting out an outage is "
        "not charged); null: only the per-request tries bound them",
        ge=0,
    )
    policy_max_inflight: int | None = setting(
        None, "requests in flight at once to the policy server, whole process (default: unbounded)", ge=1
    )
    user_max_inflight: int | None = setting(
        None, "requests in flight at once to the LLM user simulator (default: unbounded)", ge=1
    )
    judge_max_inflight: int | None = setting(
        None, "rewards scored at once while an NL-assertion judge may be asked (default: unbounded)", ge=1
    )
    episode_timeout_s: float | None = setting(
        None,
        "wall-clock deadline per episode: past it the episode ends at the next turn as deadline (TRUNCATED, "
        "not scored, not trained on) (default: none)",
        gt=0,
        noun="seconds",
    )
    max_failed_share: float | None = setting(
        None,
        "run-level failure guard (group_filter): stop once more than this share of recent episodes FAILED on one "
        "endpoint (default: the guard's)",
        gt=0,
        le=1,
        noun="a share",
        note="(1 = never stop)",
    )
    failure_window_groups: int | None = setting(
        None, "the failure guard's window in groups (default: slime's rollout_batch_size)", ge=1
    )
    reward_shaping: float = setting(
        0.0,
        "weight w of τ's partial score in the training reward: τ's reward + w * partial_score (0 when absent); "
        "evaluation is never shaped and pass rates use τ's own reward (task_reward in metadata)",
        ge=0,
        noun="a weight",
    )

    def __init__(self, /, **values: Any) -> None:
        """Build from keyword values; a refused value is one ``ConfigError`` line naming its ``tau_*`` key."""
        self._validate(values, cf.tau_key)

    @classmethod
    def from_values(cls, values: dict[str, Any], *, key_of: cf.KeyNamer = cf.tau_key) -> TauConfig:
        """Build from ``values``; a refusal names each key as ``key_of`` spells it (the CLI: the flag it typed).

        Raises:
            ConfigError: one line naming the key, the value and what is expected.
        """
        config = cls.__new__(cls)
        config._validate(values, key_of)
        return config

    def _validate(self, values: dict[str, Any], key_of: cf.KeyNamer) -> None:
        """pydantic's check into ``self`` (what ``BaseModel.__init__`` does), with ``key_of`` as its context: a
        custom ``__init__`` makes ``model_validate`` drop the context, so both doors come here."""
        try:
            self.__pydantic_validator__.validate_python(values, self_instance=self, context={"key_of": key_of})
        except ValidationError as exc:
            raise ConfigError(cf.refusal(exc, type(self).model_fields, key_of)) from None

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name and cf.refuses_bool(cls.model_fields[info.field_name], value):
            raise ValueError("a boolean is not a number")
        return value

    @model_validator(mode="after")
    def _combinations(self, info: ValidationInfo) -> TauConfig:
        """Settings that only work together (each value alone is already checked)."""
        key = cf.key_namer(info.context)
        check_domain(self.benchmark, self.domain)
        if self.user is UserKind.LLM and not (self.user_base_url and self.user_model):
            raise ConfigError(
                f"{key('user')}=llm needs {key('user_base_url')} (an OpenAI-compatible base URL, e.g. "
                f"http://host:8000/v1) and {key('user_model')}; the API key comes from the environment variable "
                f"named by {key('user_api_key_env')}"
            )
        if bool(self.judge_base_url) != bool(self.judge_model):
            raise ConfigError(f"{key('judge_base_url')} and {key('judge_model')} must be set together (or neither)")
        return self

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(cls.model_fields)

    @classmethod
    def from_args(cls, args: Any, **overrides: Any) -> TauConfig:
        """Build from slime's ``args`` (a minimal object is fine: every attribute is optional); ``overrides`` win.

        Budgets follow slime's multi-turn convention: ``config_slime.slime_values``.

        Raises:
            ConfigError: a ``tau_*`` attribute is not a known key (the message names the closest one), or a
                value is invalid.
        """
        values = slime_values(args, cls.field_names(), coerce_field)
        values.update({k: v for k, v in overrides.items() if v is not None})
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


def coerce_field(name: str, value: Any, key: str | None = None) -> Any:
    """``value`` as field ``name``'s type (``"30"`` -> 30 for an int, ``"fast"`` -> RewardMode.FAST), range checked.

    ``key`` is how the message names the setting (default ``tau_<name>``; ``""``: the value alone, for a flag
    parser that names the flag itself).

    Raises:
        ConfigError: naming the key, the value and what is expected.
    """
    field = TauConfig.model_fields[name]
    key = cf.tau_key(name) if key is None else key
    shown = f"{key}={value!r}" if key else repr(value)
    return cf.checked_value(field, value, shown, nullable=bool(key))


def env_secret(var_name: str | None) -> str | None:
    """Read an API key from the environment variable the config names (never from config itself)."""
    return os.environ.get(var_name) if var_name else None
