"""Process resources: what every episode of one config shares, built once from config alone.

:class:`EpisodeResources` holds the tokenizer, the chat template and tool-call parser per tool set
(:class:`ToolingCache`), the τ backend, the scoring options (reward mode, NL-assertion judge) and the
LLM user's client. It is everything an episode needs except the policy, which each front door injects
per episode (``engine.EpisodeEngine``).

Owner, key and lifetime: :meth:`EpisodeResources.for_config` is the one cache, kept in the shared state
(``shared.py``: ``SharedState.resources``). Its key is everything the resources are built from: the frozen
``TauConfig`` (hashable: every field is a value), the identity of a tokenizer the caller brings (verl brings
its own; the entry holds it, so its id stays unique) and the backend wrapper a tool installed (none unless a
tool turned fault injection on); an entry lives as long as the process. The first call for a key builds the
resources in a worker thread (tokenizer files, SGLang's parsers and τ's import take seconds), so slime's event
loop keeps serving other episodes meanwhile; concurrent callers await the same build. A failed build is not
cached: the next call tries again. A build ends by freezing what is alive out of the cyclic GC's reach
(:func:`freeze_long_lived`): a full collection over τ's data and the tokenizer was the loop's longest pause.
The default policy client (``tau_policy_url``) is built here too, for the
front doors that use it. Nothing here imports slime, verl or a tool.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from slime_tau_plugin.engine.chat.template_probe import PROBE_TOOLS, opens_thinking
from slime_tau_plugin.engine.chat.templates import ChatTemplate, load_tokenizer
from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser, check_parser_names
from slime_tau_plugin.engine.chat.tool_prompt import tools_system_text
from slime_tau_plugin.engine.choices import ToolsInPrompt
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import EnvBackend, EnvOptions, get_backend
from slime_tau_plugin.engine.errors import ConfigError, MissingSettingError
from slime_tau_plugin.engine.policy.client import PolicyClient, policy_client
from slime_tau_plugin.engine.shared import BackendWrapper, shared_state
from slime_tau_plugin.engine.users.chat_client import ChatClient
from slime_tau_plugin.engine.users.review_judge import JudgeReviewer, review_judge
from slime_tau_plugin.engine.users.simulators import user_client

logger = logging.getLogger(__name__)
_OPENING = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
"""What a template's generation prompt is rendered after, to see whether it opens the reasoning."""


class ToolingCache:
    """One chat template and tool-call parser per tool set, shared by every episode of a process.

    Building them costs milliseconds (template probing, parser setup); every episode of a domain needs
    the same pair. The lock guards only the dict: callers run :meth:`get` in a worker thread.
    """

    def __init__(self, tokenizer: Any, config: TauConfig) -> None:
        """Probe the chat template once with a probe tool set (``template_probe``), before any episode.

        Raises:
            ConfigError: one line naming the tokenizer, when its template cannot run τ episodes.
        """
        self._tokenizer, self._config = tokenizer, config
        self._cache: dict[str, tuple[ChatTemplate, ToolCallParser]] = {}
        self._lock = threading.Lock()
        probe = chat_template_for(tokenizer, config, PROBE_TOOLS)
        if config.reasoning_parser is None and opens_thinking(probe, _OPENING):
            raise ConfigError(  # the reply starts inside the reasoning: without a parser it all reaches τ as text
                f"tau_reasoning_parser is unset, but the chat template of {probe.name} opens the reasoning in its "
                "generation prompt (<think>): every reply's reasoning would reach the user and τ as text; set "
                "tau_reasoning_parser (qwen3-thinking for Qwen3.5/3.6, deepseek-v4 for DeepSeek V4) or "
                "tau_enable_thinking: false"
            )

    def get(self, tools: list[dict[str, Any]]) -> tuple[ChatTemplate, ToolCallParser]:
        key = json.dumps(tools, sort_keys=True)
        with self._lock:
            if key not in self._cache:
                cfg = self._config
                template = chat_template_for(self._tokenizer, cfg, tools)
                opened = opens_thinking(template, _OPENING)  # the reply starts inside the reasoning
                parser = ToolCallParser(tools, cfg.tool_call_parser, cfg.reasoning_parser, True if opened else None)
                self._cache[key] = (template, parser)
            return self._cache[key]


def chat_template_for(tokenizer: Any, config: TauConfig, tools: list[dict[str, Any]]) -> ChatTemplate:
    """The chat template for ``tools`` as ``config`` says: thinking, and how the tools reach the prompt.

    Raises:
        ConfigError: the template cannot run τ episodes (one line naming the tokenizer).
    """
    kwargs = {} if config.enable_thinking is None else {"enable_thinking": config.enable_thinking}
    system = config.tools_in_prompt is ToolsInPrompt.SYSTEM
    text = tools_system_text(tools, config.tool_call_parser) if system else None
    return ChatTemplate(tokenizer, tools, kwargs, text)


def freeze_long_lived() -> None:
    """Move everything alive now (τ's data, the tokenizer, imported modules) out of the cyclic GC's reach.

    A full collection walks every tracked object; with τ² retail and the Qwen tokenizer loaded one held slime's
    event loop for 350-460 ms at 128 episodes in flight (benchmarks/turn_cpu.md), the loop's longest pause. What
    is frozen is long-lived by nature; garbage made after this is collected as before (``gc.freeze``). The collection
    first costs ~0.3 s once per process (later builds' collections skip what is already frozen).
    """
    gc.collect()
    gc.freeze()


def env_options(config: TauConfig) -> EnvOptions:
    """How every episode of ``config`` is scored and built (reward mode, NL assertions, judge, retrieval)."""
    return EnvOptions(config.reward_mode, config.nl_assertions, config.judge_endpoint(), config.retrieval_variant)


def _load_tasks(backend: EnvBackend, config: TauConfig) -> None:
    """Load the configured split's tasks here, in the build's worker thread: slime's integer prompts are looked
    up in them on the event loop (``data.task_ref_from_sample``), which then only reads a loaded list."""
    try:
        backend.task_refs(config.domain, config.split)
    except ConfigError as exc:  # rows may name their own split; a bad one is reported where it is used
        logger.debug("tasks of %s/%s/%s not preloaded: %s", config.benchmark, config.domain, config.split, exc)


@dataclass(frozen=True, slots=True, eq=False)
class EpisodeResources:
    """What the episodes of one config share; the policy is not among them (it is injected per episode)."""

    config: TauConfig
    tokenizer: Any
    backend: EnvBackend
    """The τ version's backend (process-wide, from ``envs.get_backend``)."""
    tooling: ToolingCache
    env_options: EnvOptions
    """Reward mode, NL-assertion handling and the judge's endpoint: the same for every episode."""
    user_client: ChatClient | None = None
    """The LLM user's pooled client; None for the scripted user."""
    policy: PolicyClient | None = None
    """The client for ``tau_policy_url`` (``tau_policy_api`` picks its class): slime's and the CLI's policy.
    None without a URL: verl injects its own per episode."""
    review_judge: JudgeReviewer | None = None
    """τ²'s user-review rubric on the judge endpoint (``tau_review_judge_share`` > 0); None otherwise."""

    @classmethod
    def build(cls, config: TauConfig, *, tokenizer: Any = None, backend: EnvBackend | None = None) -> EpisodeResources:
        """Build synchronously (slow on first use: run it off the event loop; :meth:`for_config` does). The τ
        backend (``backend``, else the process's for ``tau_benchmark``) goes through the backend wrapper a tool
        installed in the shared state, if any.

        Raises:
            MissingSettingError: no tokenizer path is configured and none is given.
            ConfigError: the tokenizer, parser names or benchmark cannot be used.
        """
        return cls._build(config, tokenizer, backend, shared_state().backend_wrapper)

    @classmethod
    def _build(
        cls, config: TauConfig, tokenizer: Any, backend: EnvBackend | None, wrapper: BackendWrapper | None
    ) -> EpisodeResources:
        policy = policy_client(config) if config.policy_url else None
        check_parser_names(config.tool_call_parser, config.reasoning_parser)
        if tokenizer is None:
            if not config.tokenizer_path:
                raise MissingSettingError(
                    "no tokenizer: set tau_tokenizer_path or slime's --hf-checkpoint to a local directory"
                )
            path, remote = config.tokenizer_path, config.trust_remote_code
            tokenizer = shared_state().tokenizers.get((path, remote), lambda: load_tokenizer(path, remote))
        backend = backend if backend is not None else get_backend(config.benchmark)
        _load_tasks(backend, config)
        options = env_options(config)
        backend.build_domain(config.domain, options)  # τ lists it but cannot build it: one line, before any episode
        return cls(
            config=config,
            tokenizer=tokenizer,
            backend=backend if wrapper is None else wrapper(backend, config),
            tooling=ToolingCache(tokenizer, config),
            env_options=options,
            user_client=user_client(config),
            policy=policy,
            review_judge=review_judge(config),
        )

    async def aclose(self) -> None:
        """Close the HTTP sessions opened on the running loop (a script's loop ends before the process)."""
        judge = self.review_judge.client if self.review_judge is not None else None
        for client in (self.policy, self.user_client, judge):
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()

    @classmethod
    async def for_config(cls, config: TauConfig, *, tokenizer: Any = None) -> EpisodeResources:
        """The process's resources for ``config`` (and ``tokenizer``, if the caller brings one), built once
        off the event loop.

        Raises:
            MissingSettingError, ConfigError: as :meth:`build` (not cached; the next call retries).
        """
        wrapper = shared_state().backend_wrapper
        key = (config, id(tokenizer) if tokenizer is not None else None, wrapper)

        def build() -> EpisodeResources:
            built = cls._build(config, tokenizer, None, wrapper)
            freeze_long_lived()
            logger.info("slime-tau-plugin resources ready: %r", config)
            return built

        return await shared_state().resources.aget(key, build)
