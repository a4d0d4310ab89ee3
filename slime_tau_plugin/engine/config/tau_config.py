"""``TauConfig``: every knob of the plugin in one frozen pydantic model; each key declared once.

Sources, in order of precedence: explicit keyword arguments (CLI), then slime ``args`` attributes
named ``tau_<field>`` (set by slime's ``--custom-config-path`` YAML), then slime's own args
(``rollout_max_context_len``, ``hf_checkpoint``, ``sglang_router_ip``...), then defaults. Only this
module reads ``os.environ`` (for API keys named by ``*_api_key_env``).

The type boundary: each field's name, type, default, range and help text are its declaration in
``keys.py`` (``fields.setting``); pydantic checks every value from any front door (a quoted
number becomes a number, a choice becomes its enum from ``choices.py``, unknown keys are refused) and a
refusal is one ``ConfigError`` line naming the key as that front door spells it (``tau_<field>``, or the
CLI's flag: :meth:`TauConfig.from_values`). The CLI generates its ``rollout`` flags from these fields. The
config is hashable and equal by value: it is the key of the process resources (``resources.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError, ValidationInfo, field_validator, model_validator

from slime_tau_plugin.engine.choices import AgentErrorRule, UserKind
from slime_tau_plugin.engine.config import fields as cf
from slime_tau_plugin.engine.config.fields import known_key
from slime_tau_plugin.engine.config.guidelines import TAU_DEFAULT, UserGuidelines, load_guidelines
from slime_tau_plugin.engine.config.keys import KEY_READERS, PROVIDED_BY, TauKeys, Trainer
from slime_tau_plugin.engine.envs import BENCHMARKS, check_domain
from slime_tau_plugin.engine.episode.limits import EpisodeLimits
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.net.replicas import bad_url, split_urls
from slime_tau_plugin.engine.net.user_budget import UserTokenBudget
from slime_tau_plugin.engine.review.names import parse_names
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag

__all__ = ["LLMEndpoint", "TauConfig", "coerce_field", "env_secret", "known_key", "refuse_unread"]


@dataclass(frozen=True, slots=True)
class LLMEndpoint:
    """An OpenAI-compatible chat endpoint (user simulator or NL-assertion judge).

    The API key is never part of config: ``api_key_env`` names the environment variable holding it.
    """

    base_url: str
    """e.g. ``http://127.0.0.1:30001/v1`` (``/chat/completions`` is appended); several replicas comma-separated."""
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

    @property
    def urls(self) -> tuple[str, ...]:
        """The replicas' base URLs (one for a single endpoint)."""
        return split_urls(self.base_url)


class TauConfig(TauKeys):
    """Plugin configuration. YAML key = ``tau_`` + field name (e.g. ``tau_domain: airline``); keys: ``TauKeys``."""

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

    @field_validator("user_base_url", "judge_base_url", mode="before")
    @classmethod
    def _replica_urls(cls, value: Any, info: ValidationInfo) -> Any:
        """One URL, several comma-separated, or a list (slime's YAML, verl's config): one comma-joined string,
        each URL checked."""
        if value is None or not isinstance(value, (str, Sequence)):
            return value
        urls = split_urls(value)
        key = cf.key_namer(info.context)(info.field_name or "")
        if not urls:
            raise ConfigError(f"{key}={value!r} names no URL; expected e.g. http://host:8000/v1 (several: a,b)")
        twice = sorted({url for url in urls if urls.count(url) > 1})
        if twice:
            raise ConfigError(f"{key} lists {twice[0]} twice; name each replica once")
        for url in urls:
            if bad_url(url):
                raise ConfigError(
                    f"{key} has {url!r}, which is not an http(s) URL; expected e.g. http://host:8000/v1 "
                    "(several replicas: comma-separated)"
                )
        return ",".join(urls)

    @field_validator("review_checks", "review_critical_tags", mode="after")
    @classmethod
    def _review_names(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Each named check or τ² tag must exist (``engine/review/verdict.py``)."""
        kind = ReviewCheck if info.field_name == "review_checks" else ReviewTag
        allowed = tuple(c for c in ReviewCheck if c is not ReviewCheck.JUDGE) if kind is ReviewCheck else None
        parse_names(value, kind, cf.key_namer(info.context)(info.field_name or ""), allowed)  # type: ignore[arg-type]
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
        if self.reasoning_parser == "qwen3-thinking" and self.enable_thinking is False:
            raise ConfigError(  # that parser reads every reply as reasoning until </think>: nothing would be parsed
                f"{key('reasoning_parser')}=qwen3-thinking expects the prompt to open <think>, but "
                f"{key('enable_thinking')}=false closes it; without thinking, set {key('reasoning_parser')}: "
                "qwen3 or null"
            )
        if bool(self.judge_base_url) != bool(self.judge_model):
            raise ConfigError(f"{key('judge_base_url')} and {key('judge_model')} must be set together (or neither)")
        if self.review_judge_share > 0 and not self.judge_base_url:
            raise ConfigError(
                f"{key('review_judge_share')}={self.review_judge_share:g} needs a judge endpoint: set "
                f"{key('judge_base_url')} and {key('judge_model')}, or {key('review_judge_share')}: 0"
            )
        if self.user_guidelines_file is not None:
            if self.user is not UserKind.LLM:
                raise ConfigError(
                    f"{key('user_guidelines_file')} overrides the LLM user simulator's guidelines, but "
                    f"{key('user')}={self.user.value} runs none; set {key('user')}: llm or drop the key"
                )
            load_guidelines(self.user_guidelines_file, key("user_guidelines_file"))
        budget = self.user_token_budget_per_step is not None or self.user_token_budget_total is not None
        if budget and self.episode_workers:
            raise ConfigError(
                f"{key('user_token_budget_per_step')}/{key('user_token_budget_total')} cannot be kept with "
                f"{key('episode_workers')}={self.episode_workers}: the budget's counter lives in one process; "
                f"set {key('episode_workers')}: 0 or drop the budget"
            )
        return self

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(cls.model_fields)

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

    @property
    def user_token_budget(self) -> UserTokenBudget:
        """The LLM user's token limits per rollout step and per run (``net/user_budget.py``)."""
        return UserTokenBudget(self.user_token_budget_per_step, self.user_token_budget_total)

    def user_guidelines(self) -> UserGuidelines | None:
        """The run's override of τ's user-simulator guidelines (``tau_user_guidelines_file``), or None: τ's own."""
        if self.user_guidelines_file is None or self.user is not UserKind.LLM:
            return None
        return load_guidelines(self.user_guidelines_file)

    def user_guidelines_label(self) -> str | None:
        """Which guidelines the customer runs, as the review and the cost report record it: the override's
        ``name@hash``, ``tau`` for τ's own, None for the scripted customer (it follows none)."""
        if self.user is not UserKind.LLM:
            return None
        guidelines = self.user_guidelines()
        return guidelines.label if guidelines is not None else TAU_DEFAULT

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


def refuse_unread(values: Mapping[str, Any], trainer: Trainer) -> None:
    """Refuse a key (field name -> value) that ``trainer`` does not read (``keys.KEY_READERS``) unless it holds its
    default: under that trainer it would do nothing, silently. A key at its default (``null``, ``false``, slime's
    value) passes, so one YAML can serve several trainers.

    Raises:
        ConfigError: one line naming the ``tau_*`` key and who reads it.
    """
    for name, value in values.items():
        readers = KEY_READERS[name]
        if trainer in readers or coerce_field(name, value) == TauKeys.model_fields[name].default:
            continue
        if name in PROVIDED_BY.get(trainer, ()):
            why = f"{trainer} provides it"
        else:
            names = [r.value for r in Trainer if r in readers]
            why = "only " + ", ".join(names) + (" reads it" if len(names) == 1 else " read it")
        raise ConfigError(f"tau_{name}={value!r} does nothing under {trainer} ({why}); remove it")


def env_secret(var_name: str | None) -> str | None:
    """Read an API key from the environment variable the config names (never from config itself)."""
    return os.environ.get(var_name) if var_name else None
