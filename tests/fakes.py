"""Fakes for the external seams that unit tests replace (and nothing else).

Each fake stands in for one thing outside this package; everything between them runs for real (the
episode loop, ``ScriptedUser``, ``ChatTemplate``, ``Trajectory``, SGLang's own tool-call parsers).

- :class:`FakeTokenizer` replaces a Hugging Face tokenizer (``transformers.PreTrainedTokenizerBase``): the
  object ``templates.ChatTemplate`` and ``agent.py`` drive through ``chat_template``, ``apply_chat_template``,
  ``encode``, ``decode``, ``all_special_tokens``, ``added_tokens_decoder``, ``eos_token(_id)`` and
  ``name_or_path``. Templates are real Jinja2 rendered in a sandbox, as Hugging Face does; tokenization is a
  tiny greedy longest-match vocabulary whose merges (``"hello"``, ``"ab"``, ``"\\n<"``, ``"D\\n"``, ...)
  make ``encode(a) + encode(b) != encode(a + b)`` constructible, which is the hazard TITO exists for.
- :class:`FakePolicy` replaces the model being trained behind ``policy.PolicyClient`` (SGLang's ``/generate``,
  which ``SGLangPolicy`` speaks over HTTP): scripted :class:`FakeTurn` replies, encoded with the tokenizer plus
  its end-of-turn, cut at ``max_new_tokens`` like SGLang (finish ``length``), deterministic log-probs
  (:func:`fake_logprob`), optional scripted ``PolicyError``s and a model context (``ContextLengthError``).
  Every call is kept as a :class:`PolicyRequest`.
- :class:`FakeEnvBackend` / :class:`FakeEnvSession` replace a τ package behind ``envs.base.EnvBackend`` /
  ``EnvSession`` (τ²'s or τ-bench v1's environment, database, tools and evaluator): a two-order in-memory
  database, three tools with OpenAI schemas (:data:`FAKE_TOOLS`; ``transfer_to_human_agents`` ends the
  episode), reward 1.0 when order ``#1`` is cancelled in a scored episode, and the failures in
  :class:`EnvFaults` (a tool that raises, a slow step, a reward that raises, ...). Sessions record steps,
  messages and reward calls.

Three templates are selectable by name (:data:`TEMPLATES`):

- ``"chatml"``: Qwen2.5-like ChatML; consecutive tool messages share one
  ``<|im_start|>user\\n<tool_response>\\n...\\n</tool_response><|im_end|>\\n`` turn; it never rewrites history.
- ``"think"``: Qwen3-like; renders an assistant's ``<think>`` block only after the last user message and
  strips it from earlier ones (history rewriting); honours ``enable_thinking=False``.
- ``"text_eot"``: a turn ends with the plain text ``END`` (the eos, but not a special token), which merges
  with the newline after it, so the end-of-turn boundary is not prefix-safe.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

from slime_tau_plugin.envs.base import (
    EnvBackend,
    EnvOptions,
    EnvSession,
    EnvToolCall,
    GoldAction,
    RewardResult,
    StepResult,
    TaskRef,
    TaskScript,
)
from slime_tau_plugin.episode import TerminationReason
from slime_tau_plugin.errors import ContextLengthError, PolicyError
from slime_tau_plugin.policy import FinishReason, GenerateResult

_TOOL_AND_PLAIN_TURNS = (
    # Shared tail of the role switch: consecutive tool messages share one user turn, other roles are plain.
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

_CHATML = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + m.content -}}"
    "{%- if tools -%}"
    "{{- '\\n\\n<tools>' -}}{%- for t in tools -%}{{- '\\n' + (t | tojson) -}}{%- endfor -%}{{- '\\n</tools>' -}}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    + _TOOL_AND_PLAIN_TURNS
    + "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_THINK = (
    "{%- set ns = namespace(last_user=-1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set content = m.content -%}{%- set reasoning = '' -%}"
    "{%- if '</think>' in content -%}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if loop.index0 > ns.last_user and reasoning -%}"
    "{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{{- content + '<|im_end|>\\n' -}}"
    + _TOOL_AND_PLAIN_TURNS
    + "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

_TEXT_EOT = (
    "{%- for m in messages -%}{{- '### ' + m.role + ':\\n' + m.content + 'END\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '### assistant:\\n' -}}{%- endif -%}"
)

TEMPLATES: dict[str, str] = {"chatml": _CHATML, "think": _THINK, "text_eot": _TEXT_EOT}
"""Selectable chat templates (see the module docstring)."""

SPECIAL_TOKENS: dict[str, int] = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
"""Special tokens (``special=True``), split out of the text before the vocabulary runs."""

ADDED_TOKENS: dict[str, int] = {"<tool_call>": 3, "</tool_call>": 4, "<think>": 5, "</think>": 6}
"""Added but not special tokens, split like specials (as Qwen's tokenizers do), kept by ``skip_special_tokens``."""

MERGES: tuple[str, ...] = ("hello", "he", "ll", "lo", "ab", "\n<", "D\n")
"""Multi-character vocabulary entries; everything else is one id per character."""

_MERGE_BASE = 100
_CHAR_BASE = 1000


@dataclass(frozen=True, slots=True)
class FakeAddedToken:
    """What ``added_tokens_decoder`` values expose: the token text and whether it is special."""

    content: str
    special: bool


class FakeTokenizer:
    """A Hugging Face tokenizer stand-in: real Jinja2 chat templates, a tiny greedy merge vocabulary.

    ``encode`` splits special and added tokens out first (fixed ids), then tokenizes each remaining piece by
    greedy longest match over :data:`MERGES` and single characters (id ``1000 + ord(c)``).
    """

    def __init__(self, template: str = "chatml") -> None:
        if template not in TEMPLATES:
            raise ValueError(f"unknown fake template {template!r}; expected one of {', '.join(TEMPLATES)}")
        self.name_or_path = f"fake/{template}"
        self.chat_template: str | None = TEMPLATES[template]
        if template == "text_eot":
            # The eos is ordinary text here: not in the special-token lists, tokenized by the vocabulary.
            self.eos_token = "END"
            self.eos_token_id = self._char_or_merge_id("E")
            self._special = {"<|endoftext|>": 0}
        else:
            self.eos_token = "<|im_end|>"
            self.eos_token_id = SPECIAL_TOKENS["<|im_end|>"]
            self._special = dict(SPECIAL_TOKENS)
        self._added = {**self._special, **ADDED_TOKENS}
        self._id_to_added = {i: t for t, i in self._added.items()}
        self._merge_ids = {m: _MERGE_BASE + i for i, m in enumerate(MERGES)}
        self._id_to_merge = {i: m for m, i in self._merge_ids.items()}
        self._max_merge = max(len(m) for m in MERGES)
        alternatives = sorted(self._added, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(t) for t in alternatives) + ")")
        self._env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._env.filters["tojson"] = _tojson
        self._env.globals["raise_exception"] = _raise_exception
        self._compiled = functools.lru_cache(maxsize=4)(self._env.from_string)  # as Hugging Face caches them

    @property
    def all_special_tokens(self) -> list[str]:
        return list(self._special)

    @property
    def added_tokens_decoder(self) -> dict[int, FakeAddedToken]:
        return {i: FakeAddedToken(t, t in self._special) for t, i in self._added.items()}

    def apply_chat_template(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        tokenize: bool = False,
        add_generation_prompt: bool = False,
        **kwargs: Any,
    ) -> str | list[int]:
        """Render like Hugging Face: the template sees ``messages``, ``tools``, the flag and any extra kwargs."""
        if self.chat_template is None:
            raise ValueError(f"{self.name_or_path} has no chat_template")
        text = self._compiled(self.chat_template).render(
            messages=list(messages),
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            eos_token=self.eos_token,
            **kwargs,
        )
        return self.encode(text) if tokenize else text

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Special/added tokens first, then greedy longest match; no BOS is ever added."""
        ids: list[int] = []
        for piece in self._split.split(text):
            if not piece:
                continue
            if piece in self._added:
                ids.append(self._added[piece])
            else:
                ids.extend(self._encode_plain(piece))
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        out: list[str] = []
        for i in ids:
            i = int(i)
            if i in self._id_to_added:
                token = self._id_to_added[i]
                if not (skip_special_tokens and token in self._special):
                    out.append(token)
            elif i in self._id_to_merge:
                out.append(self._id_to_merge[i])
            elif i >= _CHAR_BASE:
                out.append(chr(i - _CHAR_BASE))
            else:
                raise ValueError(f"id {i} is not in the fake vocabulary")
        return "".join(out)

    def _encode_plain(self, text: str) -> list[int]:
        ids: list[int] = []
        pos = 0
        while pos < len(text):
            for size in range(min(self._max_merge, len(text) - pos), 0, -1):
                chunk = text[pos : pos + size]
                if size == 1 or chunk in self._merge_ids:
                    ids.append(self._char_or_merge_id(chunk))
                    pos += size
                    break
        return ids

    def _char_or_merge_id(self, chunk: str) -> int:
        if len(chunk) == 1:
            return _CHAR_BASE + ord(chunk)
        return _MERGE_BASE + MERGES.index(chunk)


def _tojson(value: Any, indent: int | None = None) -> str:
    """Hugging Face's ``tojson``: plain JSON, no HTML escaping (Jinja's built-in escapes ``<``)."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _raise_exception(message: str) -> None:
    raise ValueError(message)


# --- the policy seam (policy.PolicyClient) ----------------------------------------------------------------


def fake_logprob(token_id: int, position: int) -> float:
    """Deterministic log-prob in (-1, 0) that depends on the id and its absolute position in the sequence."""
    return -(((token_id * 31 + position * 17) % 997) + 1) / 1000.0


@dataclass(frozen=True, slots=True)
class FakeTurn:
    """One scripted generation."""

    text: str = ""
    finish: FinishReason = FinishReason.STOP
    is_closed: bool = True
    """Append the tokenizer's end-of-turn ids (only with ``STOP``; False = a stop string ended the turn)."""
    error: PolicyError | None = None
    """Raise this instead of generating."""


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """One ``generate`` call as the fake received it, with what it answered (None when it raised)."""

    input_ids: tuple[int, ...]
    sampling_params: dict[str, Any]
    rid: str | None
    headers: dict[str, str] | None
    result: GenerateResult | None


class FakePolicy:
    """A :class:`~slime_tau_plugin.policy.PolicyClient` that plays :class:`FakeTurn` replies in order.

    Like SGLang it keeps the stop id in ``output_ids``, cuts a reply at ``max_new_tokens`` (finish ``length``)
    and, given ``context_len``, refuses ``input + max_new_tokens > context_len`` with a ``ContextLengthError``.
    Running out of turns raises ``AssertionError``: the test scripted too few.
    """

    def __init__(self, tokenizer: FakeTokenizer, turns: Sequence[FakeTurn | str], context_len: int | None = None):
        self.tokenizer = tokenizer
        self.eot_ids = tokenizer.encode(tokenizer.eos_token)
        self.turns = [t if isinstance(t, FakeTurn) else FakeTurn(t) for t in turns]
        self.context_len = context_len
        self.requests: list[PolicyRequest] = []

    async def generate(
        self,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        *,
        rid: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> GenerateResult:
        request = (tuple(input_ids), dict(sampling_params), rid, headers)
        n = len(self.requests)
        assert n < len(self.turns), f"FakePolicy got request {n + 1} but only {len(self.turns)} turns are scripted"
        turn, max_new = self.turns[n], sampling_params.get("max_new_tokens")
        error = turn.error
        if error is None and self.context_len is not None and len(input_ids) + (max_new or 0) > self.context_len:
            error = ContextLengthError(
                f"input ({len(input_ids)} tokens) + max_new_tokens ({max_new}) exceeds the context length "
                f"({self.context_len})",
                status=400,
                body="",
            )
        if error is not None:
            self.requests.append(PolicyRequest(*request, None))
            raise error
        ids = self.tokenizer.encode(turn.text)
        closed = turn.is_closed and turn.finish is FinishReason.STOP
        ids, finish = ids + (self.eot_ids if closed else []), turn.finish
        if max_new is not None and len(ids) > max_new:
            ids, finish = ids[:max_new], FinishReason.LENGTH if finish is FinishReason.STOP else finish
        start = len(input_ids)
        result = GenerateResult(
            tuple(ids),
            tuple(fake_logprob(t, start + i) for i, t in enumerate(ids)),
            finish,
            {"finish_reason": {"type": finish.value}, "prompt_tokens": start, "completion_tokens": len(ids)},
        )
        self.requests.append(PolicyRequest(*request, result))
        return result


# --- the τ seam (envs.base.EnvBackend / EnvSession) ------------------------------------------------------


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    params = {"type": "object", "properties": {k: {"type": "string", "description": v} for k, v in properties.items()}}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


FAKE_TOOLS: list[dict[str, Any]] = [
    _tool("get_order", "Look up an order.", order_id="Order id, e.g. #1."),
    _tool("cancel_order", "Cancel a pending order.", order_id="Order id, e.g. #1."),
    _tool("transfer_to_human_agents", "Hand over to a human; ends the conversation.", summary="What happened."),
]
"""The agent's tools, as OpenAI function schemas."""

FAKE_ORDERS: dict[str, dict[str, str]] = {
    "#1": {"status": "pending", "item": "lamp"},
    "#2": {"status": "delivered", "item": "desk"},
}
"""Each session's initial database (copied per session)."""

FAKE_INSTRUCTION = "Please cancel my order #1."
FAKE_ENV_INFO = {"tau_package": "fake-tau", "tau_version": "0.0"}


@dataclass(frozen=True, slots=True)
class EnvFaults:
    """Failures a :class:`FakeEnvBackend` injects; all off by default."""

    raising_tool: str | None = None
    """A tool (agent or user side) whose step raises ``RuntimeError``: a τ failure, unlike an error result."""
    step_delay_s: float = 0.0
    """Every step sleeps this long first (longer than ``tau_env_timeout_s``: a timeout)."""
    reward_raises: bool = False
    open_raises: bool = False
    script_raises: bool = False
    """Reading the task's script raises: the scripted user fails before the episode starts."""
    record_raises: bool = False
    """``record_message`` raises (τ² builds a pydantic message there)."""
    user_actions: tuple[GoldAction, ...] = ()
    """The task's user-side reference actions, which ``ScriptedUser`` runs through ``user_step``."""


class FakeEnvSession(EnvSession):
    """One episode over a private copy of :data:`FAKE_ORDERS`; records every call the engine makes."""

    agent_system_prompt = "You are a store agent. Cancel an order only when its owner asks."

    def __init__(self, ref: TaskRef, faults: EnvFaults) -> None:
        self.ref, self.faults = ref, faults
        self.tools = [dict(t) for t in FAKE_TOOLS]
        self.db = {k: dict(v) for k, v in FAKE_ORDERS.items()}
        self.steps: list[EnvToolCall] = []
        self.user_steps: list[EnvToolCall] = []
        self.recorded: list[tuple[str, str]] = []
        self.reward_calls: list[TerminationReason] = []
        self._script = TaskScript(FAKE_INSTRUCTION, faults.user_actions, task_id=ref.task_id)

    @property
    def script(self) -> TaskScript:  # type: ignore[override]
        if self.faults.script_raises:
            raise RuntimeError("task script is corrupt")
        return self._script

    def step(self, call: EnvToolCall) -> StepResult:
        self.steps.append(call)
        handlers: dict[str, Callable[..., StepResult]] = {
            "get_order": self._get_order,
            "cancel_order": self._cancel_order,
            "transfer_to_human_agents": lambda summary="": StepResult("Transfer successful", is_done=True),
        }
        return self._run(call, handlers)

    def user_step(self, call: EnvToolCall) -> StepResult:
        self.user_steps.append(call)
        return self._run(call, {"reboot_device": lambda: StepResult("device rebooted")})

    def _run(self, call: EnvToolCall, handlers: dict[str, Callable[..., StepResult]]) -> StepResult:
        time.sleep(self.faults.step_delay_s)
        if call.name == self.faults.raising_tool:
            raise RuntimeError(f"database locked during {call.name}")
        if call.name not in handlers:
            return StepResult(f"Error: unknown tool {call.name!r}", is_error=True)
        try:
            return handlers[call.name](**call.arguments)
        except TypeError as exc:  # wrong arguments: τ answers with an error observation
            return StepResult(f"Error: {exc}", is_error=True)

    def _get_order(self, order_id: str) -> StepResult:
        if order_id not in self.db:
            return StepResult(f"Error: order {order_id!r} not found", is_error=True)
        return StepResult(json.dumps(self.db[order_id], sort_keys=True))

    def _cancel_order(self, order_id: str) -> StepResult:
        order = self.db.get(order_id)
        if order is None or order["status"] != "pending":
            return StepResult(f"Error: order {order_id!r} cannot be cancelled", is_error=True)
        order["status"] = "cancelled"
        return StepResult(json.dumps(order, sort_keys=True))

    def record_message(self, role: str, content: str) -> None:
        if self.faults.record_raises:
            raise RuntimeError(f"cannot record a {role} message")
        self.recorded.append((role, content))

    def reward(self, termination: TerminationReason) -> RewardResult:
        self.reward_calls.append(termination)
        if self.faults.reward_raises:
            raise RuntimeError("evaluator crashed")
        done = float(termination.is_scored and self.db["#1"]["status"] == "cancelled")
        return RewardResult(done, {"db": done, "scored": termination.is_scored})

    def reference_reward(self, termination: TerminationReason) -> RewardResult:
        return self.reward(termination)

    def user_system_prompt(self) -> str:
        return f"You are a customer. {FAKE_INSTRUCTION}"


@dataclass
class FakeEnvBackend(EnvBackend):
    """Opens a :class:`FakeEnvSession` (kept in ``sessions``) for any task; one task per domain and split."""

    faults: EnvFaults = EnvFaults()
    sessions: list[FakeEnvSession] = field(default_factory=list)
    name = "fake"

    def open(self, ref: TaskRef, options: EnvOptions | None = None) -> FakeEnvSession:
        if self.faults.open_raises:
            raise RuntimeError(f"task {ref.task_id!r} has no initial state")
        self.sessions.append(FakeEnvSession(ref, self.faults))
        return self.sessions[-1]

    def task_refs(self, domain: str, split: str) -> list[TaskRef]:
        return [TaskRef("tau2", domain, split, "fake-0")]

    def script(self, ref: TaskRef) -> TaskScript:
        return TaskScript(FAKE_INSTRUCTION, self.faults.user_actions, task_id=ref.task_id)

    def task_dump(self, ref: TaskRef) -> dict[str, Any]:
        return {"id": ref.task_id, "instruction": FAKE_INSTRUCTION}

    def splits(self, domain: str) -> tuple[str, ...]:
        return ("train",)

    def package_version(self) -> dict[str, str]:
        return dict(FAKE_ENV_INFO)
