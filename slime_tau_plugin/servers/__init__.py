"""CPU stand-ins that ship with the CLI: they are tools around the engine, not the engine.

- ``sglang_server.py``: an SGLang-protocol HTTP server (``/generate``, ``/abort_request``, health) whose
  "model" is a fake (``fake_models.py``: oracle, scripted, echo), so every path runs without a GPU.
- ``chat_user_server.py``: an OpenAI-compatible chat server that plays τ's simulated customer without an LLM.
- ``http_base.py``: the tiny threaded JSON-over-HTTP server both build on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..envs import TaskScript, get_backend
from ..errors import ConfigError
from .fake_models import EchoModel, OracleModel, ScriptedModel
from .sglang_server import FakeModel, SGLangServer

FAKE_MODELS = ("oracle", "scripted", "echo")


def build_sglang_server(
    model: str,
    tokenizer: Any,
    *,
    task_sets: Sequence[tuple[str, str, str]] = (),
    script: str | None = None,
    context_len: int = 32768,
    tool_call_format: str = "qwen25",
    host: str = "127.0.0.1",
    port: int = 0,
    latency_s: float = 0.0,
) -> SGLangServer:
    """Our SGLang-protocol server playing the fake model ``model`` (oracle, scripted or echo).

    ``task_sets`` are the (benchmark, domain, split) whose reference solutions the oracle knows;
    ``script`` is the scripted model's JSON file (a list of replies, one per assistant turn).

    Raises:
        ConfigError: unknown model, or a scripted model without a usable ``script`` file.
    """
    if model == "echo":
        fake: FakeModel = EchoModel(tokenizer)
    elif model == "scripted":
        fake = ScriptedModel(tokenizer, _load_script(script))
    elif model == "oracle":
        fake = OracleModel(tokenizer, oracle_scripts(task_sets), tool_call_format)
    else:
        raise ConfigError(f"fake model {model!r} is unknown; expected one of {', '.join(FAKE_MODELS)}")
    return SGLangServer(fake, host=host, port=port, latency_s=latency_s, context_len=context_len)


def oracle_scripts(task_sets: Sequence[tuple[str, str, str]]) -> list[TaskScript]:
    """The reference solutions of every task in ``task_sets``."""
    scripts: list[TaskScript] = []
    for benchmark, domain, split in task_sets:
        backend = get_backend(benchmark)
        scripts += [backend.script(ref) for ref in backend.task_refs(domain, split)]
    return scripts


def _load_script(path: str | None) -> list[str]:
    if not path:
        raise ConfigError("--policy scripted needs --script FILE.json (a JSON list of replies)")
    replies = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(replies, list) or not replies or not all(isinstance(r, str) for r in replies):
        raise ConfigError(f"--script {path}: expected a non-empty JSON list of strings")
    return replies
