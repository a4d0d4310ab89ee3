"""A real (transformers) causal LM in the loop: build a tiny one, serve it, teacher-force a finished run.

Nothing here is imported by the package or the CLI unless a model command runs (``make-tiny-model``,
``serve --model``, ``verify``): torch is an optional extra. Each module imports torch inside its
functions through :func:`import_torch`, so a missing torch is one line naming the CPU wheel.

Modules: ``tiny`` builds the random model, ``sampling`` is SGLang's sampler, ``decoder`` generates one
request, ``server`` serves it over HTTP, ``teacher`` teacher-forces a sample, ``checks`` compares, ``drift``
compares the stored text with the template's rendering; ``cli/play/verify_run.py`` drives them over a run
(reading run files is the CLI's job: nothing here imports ``cli/``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError

INSTALL_HINT = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu (the CPU wheel)"


def import_torch() -> Any:
    """``torch``, or a one-line ``ConfigError`` naming the CPU wheel.

    Raises:
        ConfigError: torch (or transformers' model classes) cannot be imported.
    """
    try:
        import torch
    except ImportError as exc:
        raise ConfigError(f"this command needs torch, which is not installed: {INSTALL_HINT}") from exc
    # transformers' deprecation notices about its own API (raised in it, or pinned on our call) are no news to a
    # user of `serve --model` or `verify`: only its errors are (configure_logging quiets its logger likewise)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|slime_tau_plugin)(\.|$)")
    return torch


def load_causal_lm(model_dir: str, device: str | None = None) -> tuple[Any, str]:
    """The model in ``model_dir`` in float32, in eval mode, on ``device`` (CUDA when torch sees one).

    float32 because the point of a model here is exact log-probs: the rollout and the teacher-forced pass
    must agree to ~1e-5, which bfloat16 cannot promise.

    Raises:
        ConfigError: torch is missing or the directory holds no loadable causal LM.
    """
    torch = import_torch()
    from transformers import AutoModelForCausalLM

    if not (Path(model_dir) / "config.json").is_file():
        raise ConfigError(
            f"{model_dir!r} holds no config.json; pass a directory written by 'slime-tau make-tiny-model' or a "
            "Hugging Face checkpoint directory"
        )

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"cannot load a causal LM from {model_dir!r} ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
            "pass a directory written by 'slime-tau make-tiny-model' or a Hugging Face checkpoint"
        ) from exc
    return model.to(device).eval(), device
