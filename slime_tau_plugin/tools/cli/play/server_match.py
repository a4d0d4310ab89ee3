"""Does the policy server at ``--sglang-url`` serve what the run assumes? Its tokenizer, and an oracle's tasks.

A server whose tokenizer is not the run's gives ids the run decodes into other text (a Qwen2.5 model read
with Qwen3's tokenizer: ``<think>`` is one id in one and four in the other), and an oracle started for other
tasks answers tasks it does not know: both still give numbers and exit 0. Checked before any episode, each
mismatch is one :class:`ConfigError` line naming both sides.

- Tokenizer: ``POST /tokenize {"prompt", "add_special_tokens": false}`` (SGLang's and vLLM's route, ours
  too) must give the run tokenizer's ids for :func:`probe_text`. A server without the route is compared
  through ``GET /model_info`` (``/get_model_info`` before SGLang 0.5.15): its ``tokenizer_path`` (else
  ``model_path``) is loaded when it is a directory here; otherwise a warning says nothing was compared.
- Model name (``--policy-model``, openai-completions): one of ``GET /v1/models``'s ids.
- Tasks: ``/model_info``'s ``tau_task_sets`` (only our built-in oracle reports it: ``[[benchmark, domain,
  split], ...]``) must hold every task of the run.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.envs import TaskRef
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.net.loop_http import shared_ssl_context

__all__ = [
    "check_served_model",
    "check_server_tasks",
    "check_server_tokenizer",
    "first_difference",
    "probe_text",
    "server_info",
    "tokenizers_differ_at",
]

logger = logging.getLogger(__name__)

TIMEOUT_S = 10.0
PLAIN_TEXT = "Hello, τ² world! Order #W2378156 costs $1,234.50 — ¿sí? 東京 <think>\nplan\n</think>\n<tool_call>"
"""Ordinary text (numbers, accents, CJK) plus markers some families make one id and others several."""


def probe_text(tokenizer: Any) -> str:
    """Text whose ids tell tokenizers apart: :data:`PLAIN_TEXT` and every added token of ``tokenizer``."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return PLAIN_TEXT + "".join(f" {token.content}" for _, token in sorted(added.items()))


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where ``a`` and ``b`` differ (the shorter one's length when one is a prefix), or None."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def tokenizers_differ_at(a: Any, b: Any) -> int | None:
    """Where two loaded tokenizers first give other ids for both probe texts, or None when they agree."""
    text = probe_text(a) + probe_text(b)
    return first_difference(a.encode(text, add_special_tokens=False), b.encode(text, add_special_tokens=False))


def server_root(url: str) -> str:
    """The server's root URL (an OpenAI-style base URL ends in ``/v1``; ``/tokenize`` sits at the root)."""
    return url.rstrip("/").removesuffix("/v1")


def server_info(url: str) -> dict[str, Any] | None:
    """SGLang's ``/model_info`` (or the older ``/get_model_info``) as a dict; None when neither answers one."""
    for path in ("/model_info", "/get_model_info"):
        answer = _request(server_root(url) + path)
        if isinstance(answer, dict):
            return answer
    return None


def check_server_tokenizer(url: str, tokenizer: Any, tokenizer_dir: str, flag: str = "--sglang-url") -> None:
    """The server tokenizes :func:`probe_text` into the run tokenizer's ids.

    Raises:
        ConfigError: the ids differ (one line naming the server's tokenizer and ``--tokenizer``).
    """
    text = probe_text(tokenizer)
    ours = list(tokenizer.encode(text, add_special_tokens=False))
    answer = _request(server_root(url) + "/tokenize", {"prompt": text, "add_special_tokens": False})
    info = server_info(url) or {}
    served = str(info.get("tokenizer_path") or info.get("model_path") or "its model")
    if isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
        theirs = answer["tokens"]
    elif Path(served).is_dir():
        if Path(served).resolve() == Path(tokenizer_dir).resolve():
            return
        from slime_tau_plugin.engine.chat.templates import load_tokenizer

        theirs = list(load_tokenizer(served).encode(text, add_special_tokens=False))
    else:
        logger.warning(
            "%s %s: the server has no /tokenize and its tokenizer (%s) is not a directory here: "
            "nothing shows that it is --tokenizer %s",
            flag,
            url,
            served,
            tokenizer_dir,
        )
        return
    at = first_difference(ours, theirs)
    if at is not None:
        raise ConfigError(
            f"{flag} {url} serves a model whose tokenizer ({served}) is not --tokenizer {tokenizer_dir}: the "
            f"same text gives other ids from position {at}; pass --tokenizer with the served model's directory"
        )


def check_served_model(url: str, model: str) -> None:
    """``--policy-model`` is a model the openai-completions server lists at ``GET /v1/models``.

    Raises:
        ConfigError: the list does not hold it (one line naming both); a server without the list is not compared.
    """
    answer = _request(server_root(url) + "/v1/models")
    data = answer.get("data") if isinstance(answer, dict) else None
    served = [str(card["id"]) for card in data or [] if isinstance(card, dict) and "id" in card]
    if served and model not in served:
        raise ConfigError(
            f"--policy-model {model}: --sglang-url {url} serves {', '.join(served[:5])}; pass one of them"
        )


def check_server_tasks(url: str, run_set: tuple[str, str, str], refs: Sequence[TaskRef], backend: Any) -> None:
    """An oracle that reports its task sets (``tau_task_sets``) knows every task of the run.

    Raises:
        ConfigError: a run task outside the server's sets (one line naming both).
    """
    sets = (server_info(url) or {}).get("tau_task_sets")
    if not isinstance(sets, list) or not sets:
        return  # not our oracle (a real model, echo, scripted): it answers whatever it is sent
    benchmark, domain, _ = run_set
    known: set[str] = set()
    for entry in sets:
        if isinstance(entry, list) and len(entry) == 3 and entry[:2] == [benchmark, domain]:
            try:
                known |= {ref.task_id for ref in backend.task_refs(domain, entry[2])}
            except ConfigError:
                continue  # a split this machine's τ lacks
    missing = [ref.task_id for ref in refs if ref.task_id not in known]
    if missing:
        served = ", ".join("/".join(map(str, entry)) for entry in sets[:4]) + (", ..." if len(sets) > 4 else "")
        raise ConfigError(
            f"--sglang-url {url}: the oracle there knows the tasks of {served}, not the run's {'/'.join(run_set)} "
            f"({len(missing)} of {len(refs)} tasks unknown, e.g. {missing[0]}); start 'slime-tau serve' with the run's "
            "--domain/--split, or pass the server's here"
        )


def _request(url: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON answer of a GET (``body`` None) or POST, or None for an error status, no answer or no JSON."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=shared_ssl_context())
    )
    try:
        with opener.open(request, timeout=TIMEOUT_S) as answer:
            return json.loads(answer.read())
    except (OSError, ValueError):  # URLError and HTTPError are OSErrors; ValueError: not JSON
        return None
