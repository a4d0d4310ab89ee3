"""SGLang's parser classes on a box without SGLang's GPU stack: one import, shared by every chat module that parses.

Apart from ``tool_calls.py`` so that ``tool_call_family.py`` (which ``tool_calls`` asks when a reply is in another
family) and ``tool_prompt.py`` reach the parsers without importing ``tool_calls``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
import types

from slime_tau_plugin.engine.errors import ConfigError

__all__ = ["import_sglang_parsers"]


def _bare_package(name: str) -> types.ModuleType:
    """Register ``name`` as a package object without running its ``__init__`` (which needs a GPU stack)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package {name!r} is not installed")
    module = types.ModuleType(name)
    module.__path__ = list(spec.submodule_search_locations)
    module.__package__ = name
    sys.modules[name] = module
    return module


_import_lock = threading.Lock()


@functools.cache
def import_sglang_parsers() -> tuple[type, type, type, type]:
    """Import SGLang's ``FunctionCallParser``, ``Tool``, ``Function`` and ``ReasoningParser`` on a CPU box.

    ``import sglang`` pulls in torch and CUDA kernels; the parser modules themselves are pure Python, so we
    register a bare ``sglang`` package object (and a bare ``xgrammar`` where the real one cannot import) and
    import just those.

    Raises:
        ConfigError: sglang is not installed (with the install command).
    """
    with _import_lock:
        return _import_sglang_parsers()


def _import_sglang_parsers() -> tuple[type, type, type, type]:
    try:
        _bare_package("sglang")
        _import_xgrammar()
        fcp = importlib.import_module("sglang.srt.function_call.function_call_parser")
        protocol = importlib.import_module("sglang.srt.entrypoints.openai.protocol")
        reasoning = importlib.import_module("sglang.srt.parser.reasoning_parser")
    except ImportError as exc:
        raise ConfigError(
            "SGLang's tool-call parser is needed: pip install 'slime-tau-plugin[sglang]' "
            f"(or: pip install --no-deps sglang xgrammar) ({exc})"
        ) from exc
    return fcp.FunctionCallParser, protocol.Tool, protocol.Function, reasoning.ReasoningParser


def _import_xgrammar() -> None:
    """The real xgrammar where it imports (GPU images), else just the pure-pydantic parts the parsers use.

    xgrammar's ``__init__`` needs torch and its native ``tvm_ffi``: a light ``--no-deps`` install lacks one
    or both (with torch present it fails on ``tvm_ffi``), so whether it imports is decided by trying.
    """
    if "xgrammar" in sys.modules and hasattr(sys.modules["xgrammar"], "StructuralTag"):
        return
    try:
        importlib.import_module("xgrammar")
        return
    except ImportError:
        for name in [n for n in sys.modules if n == "xgrammar" or n.startswith("xgrammar.")]:
            del sys.modules[name]  # a half-imported package must not shadow the bare one
    xgrammar = _bare_package("xgrammar")
    structural_tag = importlib.import_module("xgrammar.structural_tag")
    builtin = importlib.import_module("xgrammar.builtin_structural_tag")
    xgrammar.StructuralTag = structural_tag.StructuralTag
    for attr in dir(builtin):
        if not attr.startswith("_"):
            setattr(xgrammar, attr, getattr(builtin, attr))
