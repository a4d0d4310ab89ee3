"""Point τ²'s NL-assertion judge at a configured OpenAI-compatible endpoint.

τ³ tasks whose ``reward_basis`` includes ``NL_ASSERTION`` are scored by an LLM judge. τ²'s
``NLAssertionsEvaluator`` reads its model and litellm arguments from module-level names
(``DEFAULT_LLM_NL_ASSERTIONS`` / ``DEFAULT_LLM_NL_ASSERTIONS_ARGS``), so the judge is a process-wide
setting: we set those names once (litellm's ``openai/`` provider with ``api_base`` and the key read from
the named environment variable) and refuse a second, different judge in the same process.
"""

from __future__ import annotations

import threading
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError

_MODEL_NAME = "DEFAULT_LLM_NL_ASSERTIONS"
_ARGS_NAME = "DEFAULT_LLM_NL_ASSERTIONS_ARGS"
_lock = threading.Lock()
_configured: dict[str, Any] = {}


def configure_judge(mods: dict[str, Any], judge: Any) -> None:
    """Make τ²'s NL-assertion judge use ``judge`` (an ``LLMEndpoint``); idempotent for the same endpoint.

    Raises:
        ConfigError: another judge is already configured in this process, or this τ² has no such setting.
    """
    module = mods["evaluator.evaluator_nl_assertions"]
    with _lock:
        previous = _configured.get("judge")
        if previous is not None:
            if previous != judge:
                raise ConfigError(
                    f"a different NL-assertion judge is already configured in this process ({previous!r}); "
                    "use one tau_judge_* setting per process"
                )
            return
        if not hasattr(module, _MODEL_NAME) or not hasattr(module, _ARGS_NAME):
            raise ConfigError(
                f"this tau2 ({module.__name__}) has no {_MODEL_NAME}/{_ARGS_NAME}; cannot configure the judge: "
                "set tau_nl_assertions: exclude, or unset tau_judge_base_url to use τ's default judge"
            )
        args = dict(getattr(module, _ARGS_NAME))
        args.update(
            api_base=judge.base_url,
            api_key=judge.api_key or "EMPTY",
            temperature=judge.temperature,
            timeout=judge.timeout_s,
            num_retries=judge.retries,
        )
        setattr(module, _MODEL_NAME, f"openai/{judge.model}")
        setattr(module, _ARGS_NAME, args)
        _configured["judge"] = judge
