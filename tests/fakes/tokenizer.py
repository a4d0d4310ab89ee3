"""FakeTokenizer: a Hugging Face tokenizer stand-in with real Jinja2 chat templates (see ``tests.fakes``)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment

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

_TOOLS_FIRST = (  # the tool schemas ahead of the conversation, as a template that renders tools= must
    "{%- if tools -%}{{- '<|im_start|>tools\\n' -}}{%- for t in tools -%}{{- (t | tojson) + '\\n' -}}{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}{%- endif -%}"
)

_THINK = (
    _TOOLS_FIRST + "{%- set ns = namespace(last_user=-1) -%}"
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
    "{%- if tools -%}{{- '### tools:\\n' + (tools | tojson) + 'END\\n' -}}{%- endif -%}"
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
