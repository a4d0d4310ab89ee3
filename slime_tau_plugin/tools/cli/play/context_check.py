"""Refuse a ``--max-context-len`` that the first prompt alone exceeds, before any server starts.

Without this every episode ends ``budget_exhausted`` at turn 0 with pass^k 0 and exit 0: a setting
mistake that reads like a model result. The first prompt (τ's system prompt, the tool schemas and a
short opening) is measured with the run's own tokenizer and chat template for the first task.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import EnvBackend, TaskRef
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.resources import chat_template_for, env_options

OPENING = "Hi"
"""Stands in for the user's opening: the real one only adds ids, so the bound stays a lower bound."""


def first_prompt_len(config: TauConfig, tokenizer: Any, backend: EnvBackend, ref: TaskRef) -> int:
    """Token ids of task ``ref``'s first prompt (system prompt, tools, a short user opening)."""
    session = backend.open(ref, env_options(config))
    template = chat_template_for(tokenizer, config, session.tools)
    messages = [{"role": "system", "content": session.agent_system_prompt}, {"role": "user", "content": OPENING}]
    return len(template.prompt_ids(messages))


def check_prompt_fits(config: TauConfig, tokenizer: Any, backend: EnvBackend, ref: TaskRef) -> None:
    """Refuse a context bound the first prompt already reaches.

    Raises:
        ConfigError: naming ``--max-context-len``, its value and the prompt's length.
    """
    length = first_prompt_len(config, tokenizer, backend, ref)
    if length >= config.max_context_len:
        raise ConfigError(
            f"--max-context-len {config.max_context_len} is shorter than the first prompt of task {ref.task_id} "
            f"({length} token ids: system prompt and tool schemas), so no episode could take a turn; "
            f"pass --max-context-len above {length}"
        )
