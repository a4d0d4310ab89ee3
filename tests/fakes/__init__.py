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

from .env import (
    FAKE_ENV_INFO,
    FAKE_INSTRUCTION,
    FAKE_ORDERS,
    FAKE_TOOLS,
    EnvFaults,
    FakeEnvBackend,
    FakeEnvSession,
)
from .policy import (
    FakePolicy,
    FakeTurn,
    PolicyRequest,
    fake_logprob,
)
from .tokenizer import (
    ADDED_TOKENS,
    MERGES,
    SPECIAL_TOKENS,
    TEMPLATES,
    FakeAddedToken,
    FakeTokenizer,
)

__all__ = [
    "ADDED_TOKENS",
    "EnvFaults",
    "FAKE_ENV_INFO",
    "FAKE_INSTRUCTION",
    "FAKE_ORDERS",
    "FAKE_TOOLS",
    "FakeAddedToken",
    "FakeEnvBackend",
    "FakeEnvSession",
    "FakePolicy",
    "FakeTokenizer",
    "FakeTurn",
    "MERGES",
    "PolicyRequest",
    "SPECIAL_TOKENS",
    "TEMPLATES",
    "fake_logprob",
]
