"""Text -> ids through the Rust tokenizer directly, when that provably equals the Hugging Face ``encode``.

transformers' ``encode`` of a fast tokenizer sets the backend's truncation, padding and special-token
splitting, then calls ``backend_tokenizer.encode_batch``. :class:`TokenEncoder` calls the backend's
``encode_batch_fast`` (no offsets: ~20% less CPU) itself when the backend is in that same state, which it
checks on every call (another user of a shared tokenizer, verl's, may turn truncation on), only when no class
of the tokenizer's overrides that ``encode``, and only after a probe of awkward strings encoded both ways
agreed. The batch calls matter: the Rust tokenizer releases the GIL inside ``encode_batch*`` but holds it in
single ``encode`` (measured: a 200 ms ``encode`` in a worker thread let the main thread run once;
``encode_batch`` let it run throughout), so a continuation tokenized in a worker thread leaves slime's event
loop free meanwhile. Anything else falls back to the tokenizer's own ``encode``.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

_PROBES = (
    "",
    " ",
    "\n\n",
    "hello world",
    '{"order_id": "#W2378156", "price": 54.04, "items": [{"name": "Smart Watch", "options": {"color": "black"}}]}',
    "  leading and trailing  \n",
    "naïve café — 東京 🚀\t tab",
    "Error: Tool 'x' not found.\r\nline",
)


class TokenEncoder:
    """``encode(text) -> list[int]`` as ``tokenizer.encode(text, add_special_tokens=False)``, faster when it can."""

    def __init__(self, tokenizer: Any, special_texts: tuple[str, ...] = ()) -> None:
        """Probe the backend against ``tokenizer.encode`` on awkward strings and ``special_texts`` (the
        template's added tokens in context); any difference keeps the tokenizer's own ``encode``."""
        self.tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None) if _encodes_with_backend(tokenizer) else None
        if self._backend is not None:
            self._batch = getattr(self._backend, "encode_batch_fast", None) or self._backend.encode_batch
            probes = (*_PROBES, *special_texts, "".join(special_texts) + _PROBES[4])
            if not all(self._slow(text) == self._fast(text) for text in probes):
                logger.info("tokenizer %s: its Rust backend encodes differently; using its encode", _name(tokenizer))
                self._backend = None

    @property
    def is_direct(self) -> bool:
        """True when texts go to the Rust backend directly."""
        return self._backend is not None

    def encode(self, text: str) -> list[int]:
        if self._backend is None or not self._same_state():
            return self._slow(text)
        return self._fast(text)

    def _same_state(self) -> bool:
        """The backend is as ``encode`` would set it: no truncation, no padding, special tokens kept whole."""
        backend = self._backend
        split = bool(getattr(self.tokenizer, "split_special_tokens", False))
        return backend.truncation is None and backend.padding is None and backend.encode_special_tokens == split

    def _fast(self, text: str) -> list[int]:
        return self._batch([text], add_special_tokens=False)[0].ids

    def _slow(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def _encodes_with_backend(tokenizer: Any) -> bool:
    """Whether ``tokenizer.encode`` is transformers' own fast path (no class of the tokenizer's, remote code's
    or a wrapper's, changes it): only then is the backend call the same computation."""
    try:
        from transformers import PreTrainedTokenizerFast
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    except ImportError:  # pragma: no cover - transformers is a core dependency
        return False
    cls = type(tokenizer)
    return (
        isinstance(tokenizer, PreTrainedTokenizerFast)
        and getattr(cls, "encode", None) is PreTrainedTokenizerBase.encode
        and all(
            getattr(cls, name, None) is getattr(PreTrainedTokenizerFast, name, None)
            for name in ("_encode_plus", "_batch_encode_plus")
        )
    )


def _name(tokenizer: Any) -> str:
    return str(getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__)
