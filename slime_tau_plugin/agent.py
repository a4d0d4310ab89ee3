"""The episode engine: ``TrainableAgentMixin`` plays one τ task against a policy.

generate -> parse -> act -> continue, until a :class:`TerminationReason`. Every id the policy sampled is
kept unchanged (mask 1) and every continuation comes from the chat template (mask 0): see
``trajectory.py`` and ``templates.py``. τ calls go through ``run_blocking``. This module never imports
slime or verl; ``generate.py``, the CLI and the verl loop are thin adapters around :meth:`run_episode`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .blocking import run_blocking
from .chat_client import ChatClient
from .config import TauConfig
from .envs import EnvBackend, EnvOptions, EnvSession, EnvToolCall, TaskRef, get_backend
from .episode import EpisodeCounters, EpisodeResult, EpisodeTimings, TerminationReason
from .errors import (
    ContextLengthError,
    EnvBackendError,
    MissingSettingError,
    PolicyError,
    TauPluginError,
    UserSimulatorError,
)
from .policy import FinishReason, PolicyClient
from .policy_openai import OpenAICompletionsPolicy
from .policy_sglang import SGLangPolicy
from .retry import RetrySettings
from .templates import ChatTemplate, load_tokenizer
from .tool_calls import ParsedAction, ToolCallParser, check_parser_names
from .trajectory import TokenBudget, Trajectory
from .users import UserSimulator, UserTurn, make_user, user_client

logger = logging.getLogger(__name__)

T = TypeVar("T")
AbortCheck = Callable[[], bool]
"""Asked between turns: True when the trainer no longer wants this episode (slime's rollout abort)."""


class ToolingCache:
    """One chat template and tool-call parser per tool set, shared by every episode of a process.

    Building them costs milliseconds (template probing, parser setup); every episode of a domain needs
    the same pair.
    """

    def __init__(self, tokenizer: Any, config: TauConfig) -> None:
        self._tokenizer, self._config = tokenizer, config
        self._cache: dict[str, tuple[ChatTemplate, ToolCallParser]] = {}
        self._lock = threading.Lock()

    def get(self, tools: list[dict[str, Any]]) -> tuple[ChatTemplate, ToolCallParser]:
        key = json.dumps(tools, sort_keys=True)
        with self._lock:
            if key not in self._cache:
                cfg = self._config
                kwargs = {} if cfg.enable_thinking is None else {"enable_thinking": cfg.enable_thinking}
                self._cache[key] = (
                    ChatTemplate(self._tokenizer, tools, kwargs),
                    ToolCallParser(tools, cfg.tool_call_parser, cfg.reasoning_parser),
                )
            return self._cache[key]


@dataclass(slots=True)
class _Episode:
    """What one running episode accumulates; frozen into an :class:`EpisodeResult` at the end."""

    task: TaskRef
    t0: float = field(default_factory=time.perf_counter)
    session: EnvSession | None = None
    user: UserSimulator | None = None
    template: ChatTemplate | None = None
    parser: ToolCallParser | None = None
    trajectory: Trajectory | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    num_turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    parse_errors: int = 0
    template_fallbacks: int = 0
    policy_s: float = 0.0
    env_s: float = 0.0
    user_s: float = 0.0

    def result(
        self,
        termination: TerminationReason,
        env_info: dict[str, str],
        *,
        reward: float = 0.0,
        reward_info: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> EpisodeResult:
        return EpisodeResult(
            task=self.task,
            termination=termination,
            trajectory=self.trajectory,
            reward=reward,
            reward_info=reward_info or {},
            num_turns=self.num_turns,
            counters=EpisodeCounters(self.tool_calls, self.tool_errors, self.parse_errors, self.template_fallbacks),
            messages=tuple(self.messages),
            tools=tuple(self.session.tools if self.session is not None else ()),
            error=error,
            env_info=env_info,
            timings=EpisodeTimings(self.policy_s, self.env_s, self.user_s, time.perf_counter() - self.t0),
        )


class TrainableAgentMixin:
    """The multi-turn loop. The host class provides ``config``, ``policy`` (a :class:`PolicyClient`),
    ``tokenizer``, ``backend``, ``tooling`` (a :class:`ToolingCache`) and ``user_client`` (a
    ``ChatClient`` when ``config.user`` is ``llm``, else None)."""

    config: TauConfig
    policy: PolicyClient
    tokenizer: Any
    backend: EnvBackend
    tooling: ToolingCache
    user_client: ChatClient | None

    async def run_episode(
        self,
        ref: TaskRef,
        sampling_params: dict[str, Any],
        *,
        session_id: str | None = None,
        headers: dict[str, str] | None = None,
        should_abort: AbortCheck | None = None,
    ) -> EpisodeResult:
        """Play ``ref`` to the end and return the token-exact result. Never raises for external failures."""
        ep = _Episode(ref)
        env_info = self.backend.package_version()
        try:
            await self._start(ep)
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except TauPluginError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        error = None
        try:
            termination = await self._loop(ep, sampling_params, session_id or uuid.uuid4().hex, headers, should_abort)
        except ContextLengthError as exc:
            termination, error = TerminationReason.CONTEXT_LENGTH, str(exc)
        except PolicyError as exc:
            return self._fail(ep, TerminationReason.POLICY_ERROR, exc, env_info)
        except UserSimulatorError as exc:
            return self._fail(ep, TerminationReason.USER_ERROR, exc, env_info)
        except EnvBackendError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        if termination is TerminationReason.ABORTED:  # the trainer discards it: no reward work
            return ep.result(termination, env_info, error=error)
        try:
            scored = await self._env(ep, ep.session.reward, termination)
        except EnvBackendError as exc:
            return self._fail(ep, TerminationReason.ENV_ERROR, exc, env_info)
        return ep.result(termination, env_info, reward=float(scored.reward), reward_info=scored.breakdown, error=error)

    async def _loop(
        self,
        ep: _Episode,
        sampling_params: dict[str, Any],
        rid_prefix: str,
        headers: dict[str, str] | None,
        should_abort: AbortCheck | None,
    ) -> TerminationReason:
        traj, template = ep.trajectory, ep.template
        budget = self.token_budget(sampling_params)
        eot = template.eot_ids
        for turn in range(self.config.max_turns):
            if should_abort is not None and should_abort():
                return TerminationReason.ABORTED
            max_new = budget.max_new_tokens(traj)
            if max_new < 1:
                return TerminationReason.BUDGET
            params = {**sampling_params, "max_new_tokens": max_new}
            t0 = time.perf_counter()
            gen = await self.policy.generate(traj.ids, params, rid=f"{rid_prefix}-{turn}", headers=headers)
            ep.policy_s += time.perf_counter() - t0
            ep.num_turns = turn + 1
            traj.add_model_turn(gen.output_ids, gen.log_probs, gen.meta_info)
            if gen.finish_reason is FinishReason.ABORT:
                return TerminationReason.ABORTED
            text = template.decode(gen.output_ids)
            ep.messages.append({"role": "assistant", "content": text})
            if gen.finish_reason is FinishReason.LENGTH:
                return TerminationReason.LENGTH
            new_messages, done = await self._act(ep, ep.parser.parse(text))
            if done is not None:
                return done
            continuation = template.continuation_ids(new_messages)
            if continuation is None:
                ep.template_fallbacks += 1
                continuation = template.continuation_ids_unsafe(new_messages)
            closing = [] if list(gen.output_ids[-len(eot) :]) == eot else eot
            ids = [*closing, *continuation]
            if not budget.fits(traj, len(ids)):
                return TerminationReason.BUDGET
            traj.add_continuation(ids)
            ep.messages.extend(new_messages)
        return TerminationReason.MAX_TURNS

    async def _act(self, ep: _Episode, action: ParsedAction) -> tuple[list[dict[str, Any]], TerminationReason | None]:
        """Carry out one parsed action; return the messages the model sees next, or a termination."""
        if action.kind == "invalid":
            ep.parse_errors += 1
            return [{"role": "tool", "content": f"Error: {action.reason}"}], None
        if action.kind == "respond":
            turn = await self._user_reply(ep, action.content)
            if turn.is_stop:
                return [], TerminationReason.USER_STOP
            return [{"role": "user", "content": turn.text}], None
        messages: list[dict[str, Any]] = []
        for i, call in enumerate(action.calls):
            ep.tool_calls += 1
            step = await self._env(
                ep, ep.session.step, EnvToolCall(call.name, call.arguments, f"call-{ep.num_turns}-{i}")
            )
            ep.tool_errors += int(step.is_error)
            messages.append({"role": "tool", "name": call.name, "content": step.content})
            if step.is_done:
                return messages, TerminationReason.AGENT_STOP
        return messages, None

    def token_budget(self, sampling_params: dict[str, Any]) -> TokenBudget:
        """Per-turn cap (the tighter of ``tau_max_tokens_per_turn`` and slime's ``max_new_tokens``), whole-sequence
        cap (``max_context_len``) and the optional whole-response cap (``tau_max_response_len``)."""
        caps = [c for c in (self.config.max_tokens_per_turn, sampling_params.get("max_new_tokens")) if c]
        per_turn = min(caps) if caps else None
        return TokenBudget(self.config.max_context_len, self.config.max_response_len, per_turn)

    # --- episode start and user turns ------------------------------------------------------------

    async def _start(self, ep: _Episode) -> None:
        session = ep.session = await self._env(ep, self.backend.open, ep.task, self.env_options())
        ep.template, ep.parser = await self._blocking(self.tooling.get, session.tools, error=EnvBackendError)
        runner = self._env_runner(EnvBackendError)
        ep.user = await self._user_call(
            ep,
            make_user(
                self.config.user,
                session,
                runner,
                scripted_replies=self.config.scripted_user_replies,
                client=self.user_client,
            ),
        )
        opening = await self._user_call(ep, ep.user.opening())
        ep.messages = [{"role": "system", "content": session.agent_system_prompt}, {"role": "user", "content": opening}]
        await self._env(ep, session.record_message, "user", opening)
        ep.trajectory = Trajectory(await self._blocking(ep.template.prompt_ids, ep.messages, error=EnvBackendError))

    def env_options(self) -> EnvOptions:
        return EnvOptions(self.config.reward_mode, self.config.nl_assertions, self.config.judge_endpoint())

    async def _user_reply(self, ep: _Episode, text: str) -> UserTurn:
        await self._env(ep, ep.session.record_message, "assistant", text)
        turn = await self._user_call(ep, ep.user.reply(text))
        if not turn.is_stop:
            await self._env(ep, ep.session.record_message, "user", turn.text)
        return turn

    async def _user_call(self, ep: _Episode, awaitable: Awaitable[T]) -> T:
        """Await a user-simulator step; its unexpected failures become UserSimulatorError."""
        t0 = time.perf_counter()
        try:
            return await awaitable
        except TauPluginError:
            raise
        except Exception as exc:
            raise UserSimulatorError(f"user simulator failed: {type(exc).__name__}: {exc}") from exc
        finally:
            ep.user_s += time.perf_counter() - t0

    async def _env(self, ep: _Episode, fn: Callable[..., T], *args: Any) -> T:
        """A timed τ call off the loop (reset, step, reward); failures become EnvBackendError."""
        t0 = time.perf_counter()
        try:
            return await self._blocking(fn, *args, error=EnvBackendError)
        finally:
            ep.env_s += time.perf_counter() - t0

    def _env_runner(self, error: type[TauPluginError]) -> Callable[..., Awaitable[Any]]:
        async def run(fn, *args):
            return await self._blocking(fn, *args, error=error)

        return run

    async def _blocking(self, fn: Callable[..., T], *args: Any, error: type[TauPluginError]) -> T:
        """Run τ code off the loop; translate its failures into our error type at this seam."""
        try:
            return await run_blocking(fn, *args, timeout=self.config.env_timeout_s, workers=self.config.env_workers)
        except TauPluginError:
            raise
        except TimeoutError as exc:
            raise error(f"{getattr(fn, '__name__', fn)} timed out after {self.config.env_timeout_s}s") from exc
        except Exception as exc:
            raise error(f"{getattr(fn, '__name__', fn)} failed: {type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _fail(ep: _Episode, reason: TerminationReason, exc: BaseException, env_info: dict[str, str]) -> EpisodeResult:
        logger.warning("task=%s/%s episode failed: %s", ep.task.domain, ep.task.task_id, exc)
        return ep.result(reason, env_info, error=f"{type(exc).__name__}: {exc}")


class TrainableToolCallingAgent(TrainableAgentMixin):
    """A tool-calling agent bound to one policy, tokenizer and τ backend."""

    def __init__(self, config: TauConfig, policy: PolicyClient, tokenizer: Any, backend: EnvBackend) -> None:
        self.config = config
        self.policy = policy
        self.tokenizer = tokenizer
        self.backend = backend
        self.tooling = ToolingCache(tokenizer, config)
        self.user_client = user_client(config.user_endpoint())

    async def aclose(self) -> None:
        """Close the HTTP sessions this agent opened on the running loop (before a script's loop ends)."""
        for client in (self.policy, self.user_client):
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()


def agent_factory(
    config: TauConfig, *, policy: PolicyClient | None = None, tokenizer: Any = None
) -> TrainableToolCallingAgent:
    """Build an agent from config alone (policy URL and protocol, tokenizer path and benchmark come from it).

    Raises:
        MissingSettingError: no policy URL or tokenizer path is configured.
        ConfigError: they, or the parser names, cannot be used.
    """
    if policy is None:
        if not config.policy_url:
            raise MissingSettingError(
                "no policy server: set tau_policy_url or slime's --sglang-router-ip/--sglang-router-port"
            )
        retry = RetrySettings(attempts=config.policy_retries)
        if config.policy_api == "openai-completions":
            policy = OpenAICompletionsPolicy(
                config.policy_url, model=config.policy_model, timeout_s=config.policy_timeout_s, retry=retry
            )
        else:
            policy = SGLangPolicy(config.policy_url, timeout_s=config.policy_timeout_s, retry=retry)
    check_parser_names(config.tool_call_parser, config.reasoning_parser)
    if tokenizer is None:
        if not config.tokenizer_path:
            raise MissingSettingError(
                "no tokenizer: set tau_tokenizer_path or slime's --hf-checkpoint to a local directory"
            )
        tokenizer = load_tokenizer(config.tokenizer_path)
    return TrainableToolCallingAgent(config, policy, tokenizer, get_backend(config.benchmark))
