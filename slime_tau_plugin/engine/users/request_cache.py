"""The LLM customer's exact-request cache: :class:`RequestCache` (``tau_user_cache_size``; 0 = off).

A deterministic customer answers the same request the same way, so asking it twice spends tokens and waits for
nothing. What is deterministic: a request at temperature 0, or one that carries a ``seed`` (vLLM and SGLang sample
a seeded request reproducibly). Any other request is never looked up nor stored. The key is the whole request
body (model, messages, tools, temperature, seed: canonical JSON, hashed), so two requests share an answer only when
every byte the server would read is the same; the endpoint's URLs are part of the key too.

Off by default: a real server at temperature 0 is not bitwise deterministic (batching changes the numerics), so a
cache turns "nearly the same answer" into "the same answer", which changes what independent trials measure. Turn it
on where the customer is meant to be a fixed function of its input (training against a greedy customer).

One cache per :class:`~.chat_client.ChatClient`, i.e. per config per process (a worker process or a Ray actor has
its own); bounded, least recently used dropped first; a lock makes it safe across event loops and threads. Two
identical requests in flight at once both go out (the shared opening, ``shared_opening.py``, is what dedupes
concurrent requests of a group); the answer is stored as JSON and handed back as a fresh copy.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any


def is_deterministic(body: dict[str, Any]) -> bool:
    """Whether a chat request must get the same answer each time: temperature 0, or a ``seed``."""
    return body.get("seed") is not None or float(body.get("temperature") or 0.0) == 0.0


def request_key(body: dict[str, Any], urls: tuple[str, ...] = ()) -> str:
    """The digest of a request body (and the endpoint it goes to) as canonical JSON."""
    text = json.dumps({"urls": list(urls), "body": body}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class RequestCache:
    """At most ``size`` answers by request key; counts its hits and misses since the process started."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a request cache holds at least one answer, not {size}")
        self.size = size
        self.hits = 0
        self.misses = 0
        self._answers: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer (a fresh copy), or None; counts a hit or a miss."""
        with self._lock:
            text = self._answers.get(key)
            if text is None:
                self.misses += 1
                return None
            self._answers.move_to_end(key)
            self.hits += 1
        return json.loads(text)

    def put(self, key: str, message: dict[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False)
        with self._lock:
            self._answers[key] = text
            self._answers.move_to_end(key)
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)

    def __len__(self) -> int:
        return len(self._answers)

    def __repr__(self) -> str:
        return f"RequestCache(size={self.size}, held={len(self)}, hits={self.hits}, misses={self.misses})"
