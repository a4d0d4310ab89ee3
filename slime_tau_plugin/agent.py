"""The episode engine: ``TrainableAgentMixin`` plays one τ task against an SGLang policy.

generate -> parse -> act -> continue, until a :class:`TerminationReason`. Every id the policy sampled is
kept unchanged (mask 1) and every continuation comes from the chat template (mask 0): see
``trajectory.py`` and ``templates.py``. τ calls go through ``run_blocking``. This module never imports
slime or verl; ``generate.py`` and the CLI are thin adapters around :meth:`run_episode`.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .blocking import run_blocking
from .chat_client import ChatClient
from .config import TauConfig
from .envs import EnvBackend, EnvOptions, EnvSession, EnvToolCall, TaskRef, get_backend
from .errors import (
    ConfigError,
    ContextLengthError,
    EnvBackendError,
    PolicyError,
    TauPluginError,
    UserSimulatorError,
)
from .policy import FINISH_ABORT, FINISH_LENGTH, RetryPolicy, SGLangPolicy
from .templates import ChatTemplate, load_tokenizer
from .tool_calls import ParsedAction, ToolCallParser, check_parser_names
from .trajectory import TokenBudget, Trajectory
from .users import UserSimulator, UserTurn, make_user, user_client

logger = logging.getLogger(__name__)


class TerminationReason(str, enum.Enum):
    """Why an episode ended; ``generate.py`` maps it to slime's ``Sample.Status``."""

    USER_STOP = "user_stop"
    AGENT_STOP = "agent_stop"
    MAX_TURNS = "max_turns"
    BUDGET = "budget_exhausted"
    LENGTH = "length"
    CONTEXT_LENGTH = "context_length"
    ABORTED = "aborted"
    ENV_ERROR = "env_error"
    USER_ERROR = "user_error"
    POLICY_ERROR = "policy_error"

    @property
    def is_failure(self) -> bool:
        return self in (TerminationReason.ENV_ERROR, TerminationReason.USER_ERROR, TerminationReason.POLICY_ERROR)


@dataclass(slots=True)
class EpisodeResult:
    """Everything an adapter needs to fill a training sample."""

    task: TaskRef
    termination: TerminationReason
    trajectory: Trajectory | None
    """None only if the episode failed before its prompt existed."""
    reward: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)
    num_turns: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    """tool_calls, tool_errors, parse_errors, template_fallbacks."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation as chat messages (assistant content = the model's raw text)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    env_info: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0


@dataclass(slots=True)
class _Started:
    session: EnvSession
    user: UserSimulator
    template: ChatTemplate
    parser: ToolCallParser
    messages: list[dict[str, Any]]
    prompt_ids: list[int]


class TrainableAgentMixin:
    """The multi-turn loop. The host class provides ``config``, ``policy``, ``tokenizer`` and ``backend``
    (and ``user_client``, a ``ChatClient``, when ``config.user`` is ``llm``)."""

    config: TauConfig
    policy: SGLangPolicy
    tokenizer: Any
    backend: EnvBackend
    user_client: ChatClient | None = None

    async def run_episode(
        self,
        ref: TaskRef,
        sampling_params: dict[str, Any],
        *,
        session_id: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> EpisodeResult:
        """Play ``ref`` to the end and return the token-exact result. Never raises for external failures."""
        t0 = time.perf_counter()
        result = EpisodeResult(ref, TerminationReason.ENV_ERROR, None)
        result.counters = {"tool_calls": 0, "tool_errors": 0, "parse_errors": 0, "template_fallbacks": 0}
        result.env_info = self.backend.package_version()
        rid_prefix = session_id or uuid.uuid4().hex
        try:
            started = await self._start(ref)
        except UserSimulatorError as exc:
            return self._fail(result, TerminationReason.USER_ERROR, exc, t0)
        except TauPluginError as exc:
            return self._fail(result, TerminationReason.ENV_ERROR, exc, t0)
        result.tools = started.session.tools
        result.messages = started.messages
        traj = result.trajectory = Trajectory(started.prompt_ids)
        try:
            result.termination = await self._loop(started, traj, result, sampling_params, rid_prefix, headers)
        except ContextLengthError as exc:
            result.termination, result.error = TerminationReason.CONTEXT_LENGTH, str(exc)
        except PolicyError as exc:
            return self._fail(result, TerminationReason.POLICY_ERROR, exc, t0)
        except UserSimulatorError as exc:
            return self._fail(result, TerminationReason.USER_ERROR, exc, t0)
        except EnvBackendError as exc:
            return self._fail(result, TerminationReason.ENV_ERROR, exc, t0)
        if result.termination is not TerminationReason.ABORTED:
            try:
                reward = await self._blocking(started.session.reward, result.termination.value, error=EnvBackendError)
            except EnvBackendError as exc:
                return self._fail(result, TerminationReason.ENV_ERROR, exc, t0)
            result.reward, result.reward_info = float(reward.reward), reward.breakdown
        result.wall_s = time.perf_counter() - t0
        return result

    async def _loop(
        self,
        st: _Started,
        traj: Trajectory,
        result: EpisodeResult,
        sampling_params: dict[str, Any],
        rid_prefix: str,
        headers: dict[str, str] | None,
    ) -> TerminationReason:
        budget = self.token_budget(sampling_params)
        eot = st.template.eot_ids
        for turn in range(self.config.max_turns):
            max_new = budget.max_new_tokens(traj)
            if max_new < 1:
                return TerminationReason.BUDGET
            params = {**sampling_params, "max_new_tokens": max_new}
            gen = await self.policy.generate(traj.ids, params, rid=f"{rid_prefix}-{turn}", headers=headers)
            result.num_turns = turn + 1
            traj.add_model_turn(gen.output_ids, gen.log_probs, gen.meta_info)
            if gen.finish_reason == FINISH_ABORT:
                return TerminationReason.ABORTED
            text = st.template.decode(gen.output_ids)
            st.messages.append({"role": "assistant", "content": text})
            if gen.finish_reason == FINISH_LENGTH:
                return TerminationReason.LENGTH
            action = st.parser.parse(text)
            new_messages, done = await self._act(action, st, result)
            if done is not None:
                return done
            continuation = st.template.continuation_ids(new_messages)
            if continuation is None:
                result.counters["template_fallbacks"] += 1
                continuation = st.template.continuation_ids_unsafe(new_messages)
            closing = [] if list(gen.output_ids[-len(eot) :]) == eot else eot
            ids = [*closing, *continuation]
            if not budget.fits(traj, len(ids)):
                return TerminationReason.BUDGET
            traj.add_continuation(ids)
            st.messages.extend(new_messages)
        return TerminationReason.MAX_TURNS

    async def _act(
        self, action: ParsedAction, st: _Started, result: EpisodeResult
    ) -> tuple[list[dict[str, Any]], TerminationReason | None]:
        """Carry out one parsed action; return the messages the model sees next, or a termination."""
        if action.kind == "invalid":
            result.counters["parse_errors"] += 1
            return [{"role": "tool", "content": f"Error: {action.reason}"}], None
        if action.kind == "respond":
            turn = await self._user_reply(st, action.content)
            if turn.is_stop:
                return [], TerminationReason.USER_STOP
            return [{"role": "user", "content": turn.text}], None
        messages: list[dict[str, Any]] = []
        for i, call in enumerate(action.calls):
            result.counters["tool_calls"] += 1
            env_call = EnvToolCall(call.name, call.arguments, f"call-{result.num_turns}-{i}")
            step = await self._blocking(st.session.step, env_call, error=EnvBackendError)
            result.counters["tool_errors"] += int(step.is_error)
            messages.append({"role": "tool", "name": call.name, "content": step.content})
            if step.is_done:
                return messages, TerminationReason.AGENT_STOP
        return messages, None

    def token_budget(self, sampling_params: dict[str, Any]) -> TokenBudget:
        per_turn = self.config.max_tokens_per_turn or sampling_params.get("max_new_tokens") or None
        return TokenBudget(self.config.max_context_len, self.config.max_response_len, per_turn)

    # --- episode start and user turns ------------------------------------------------------------

    async def _start(self, ref: TaskRef) -> _Started:
        session, template, parser = await self._blocking(self._open, ref, error=EnvBackendError)
        user = await self._user_call(
            make_user(
                self.config.user,
                session,
                self._env_runner(EnvBackendError),
                scripted_replies=self.config.scripted_user_replies,
                client=self.user_client,
            )
        )
        opening = await self._user_call(user.opening())
        messages = [{"role": "system", "content": session.policy}, {"role": "user", "content": opening}]
        session.record_message("user", opening)
        prompt_ids = await self._blocking(template.prompt_ids, messages, error=EnvBackendError)
        return _Started(session, user, template, parser, messages, prompt_ids)

    def _open(self, ref: TaskRef) -> tuple[EnvSession, ChatTemplate, ToolCallParser]:
        session = self.backend.open(ref, self.env_options())
        return (session, *self._tooling(session.tools))

    def env_options(self) -> EnvOptions:
        return EnvOptions(self.config.reward_mode, self.config.nl_assertions, self.config.judge_endpoint())

    async def _user_reply(self, st: _Started, text: str) -> UserTurn:
        st.session.record_message("assistant", text)
        turn = await self._user_call(st.user.reply(text))
        if not turn.is_stop:
            st.session.record_message("user", turn.text)
        return turn

    async def _user_call(self, awaitable):
        """Await a user-simulator step; its unexpected failures become UserSimulatorError."""
        try:
            return await awaitable
        except TauPluginError:
            raise
        except Exception as exc:
            raise UserSimulatorError(f"user simulator failed: {type(exc).__name__}: {exc}") from exc

    def _env_runner(self, error: type[TauPluginError]):
        async def run(fn, *args):
            return await self._blocking(fn, *args, error=error)

        return run

    def _tooling(self, tools: list[dict[str, Any]]) -> tuple[ChatTemplate, ToolCallParser]:
        key = json.dumps(tools, sort_keys=True)
        cache = self.__dict__.setdefault("_tooling_cache", {})
        with self.__dict__.setdefault("_tooling_lock", threading.Lock()):
            if key not in cache:
                kwargs = {} if self.config.enable_thinking is None else {"enable_thinking": self.config.enable_thinking}
                cache[key] = (
                    ChatTemplate(self.tokenizer, tools, kwargs),
                    ToolCallParser(tools, self.config.tool_call_parser, self.config.reasoning_parser),
                )
            return cache[key]

    async def _blocking(self, fn, *args, error: type[TauPluginError]):
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
    def _fail(result: EpisodeResult, reason: TerminationReason, exc: BaseException, t0: float) -> EpisodeResult:
        logger.warning("task=%s/%s episode failed: %s", result.task.domain, result.task.task_id, exc)
        result.termination, result.error, result.reward = reason, f"{type(exc).__name__}: {exc}", 0.0
        result.wall_s = time.perf_counter() - t0
        return result


class TrainableToolCallingAgent(TrainableAgentMixin):
    """A tool-calling agent bound to one policy server, tokenizer and τ backend."""

    def __init__(self, config: TauConfig, policy: SGLangPolicy, tokenizer: Any, backend: EnvBackend) -> None:
        self.config = config
        self.policy = policy
        self.tokenizer = tokenizer
        self.backend = backend
        self.user_client = user_client(config.user_endpoint())


def agent_factory(
    config: TauConfig, *, policy: SGLangPolicy | None = None, tokenizer: Any = None
) -> TrainableToolCallingAgent:
    """Build an agent from config alone (policy URL, tokenizer path and benchmark come from it).

    Raises:
        ConfigError: no policy URL or tokenizer path is configured, or they cannot be used.
    """
    if policy is None:
        if not config.policy_url:
            raise ConfigError("no policy server: set tau_policy_url or slime's --sglang-router-ip/--sglang-router-port")
        policy = SGLangPolicy(
            config.policy_url, timeout_s=config.policy_timeout_s, retry=RetryPolicy(attempts=config.policy_retries)
        )
    check_parser_names(config.tool_call_parser, config.reasoning_parser)
    if tokenizer is None:
        if not config.tokenizer_path:
            raise ConfigError("no tokenizer: set tau_tokenizer_path or slime's --hf-checkpoint to a local directory")
        tokenizer = load_tokenizer(config.tokenizer_path)
    return TrainableToolCallingAgent(config, policy, tokenizer, get_backend(config.benchmark))
