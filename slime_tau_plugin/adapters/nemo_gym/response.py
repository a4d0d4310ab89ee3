"""A played episode in NeMo Gym's schemas: the Responses-API response with per-turn token ids, and the failure field.

Each model turn is one ``NeMoGymResponseOutputMessageForTraining`` whose text is the turn decoded as generated
(tool calls in the model's own format, special tokens kept) and whose ids are exact (``turns.gym_turns``). A
failed episode is dropped by each consumer's own means (:func:`failure_fields`): NeMo RL's ``mask_sample`` with a
numeric reward (never null: NeMo RL reads ``float(reward)``), and the way NeMo Gym's rollout collection routes
failures (``_ng_failure_class``; see ``nemo_gym.rollout_collection``): ``transient`` for an endpoint that failed
(user simulator, policy server; retried on resume), ``legitimate`` for an environment error, ``timeout_exceeded``
(terminal) for a run-level cut-off.
"""

from __future__ import annotations

import time
from typing import Any

from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseOutputMessageForTraining, NeMoGymResponseOutputText

from slime_tau_plugin.adapters.nemo_gym.turns import TurnTokens, gym_turns
from slime_tau_plugin.engine.chat.template_text import load_tokenizer
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.result import EpisodeResult, TerminationReason
from slime_tau_plugin.engine.workers.messages import FinishedEpisode

NG_FAILURE_CLASS_KEY = "_ng_failure_class"
NG_TERMINAL_KEY = "_ng_failure_terminal"
"""NeMo Gym's failure-routing keys (``nemo_gym.rollout_collection``), read by its dispatcher."""
MASK_SAMPLE_KEY = "mask_sample"
"""NeMo RL drops a row from the loss when ``instance_config.mask_sample`` is true (``_extract_mask_sample_flags``,
``_apply_mask_sample_filter``); Gym 0.5.1's token capture also writes a top-level ``mask_sample``."""
FAILED_REWARD = 0.0
"""The reward a failed rollout carries: a number, because NeMo RL reads every row's ``float(reward)`` (null would
crash its batch); the row is masked, so the number trains nothing."""
PLACEHOLDER_KEY = "tau_placeholder"
"""Marks the one masked, token-bearing output item of a failed rollout that played no model turn (NeMo RL refuses a
row with no generation data)."""


def task_name(result: EpisodeResult) -> str:
    task = result.task
    return f"{task.benchmark}/{task.domain}/{task.split}/{task.task_id}"


def gym_response(finished: FinishedEpisode, config: TauConfig, model: str, reward: float | None) -> dict[str, Any]:
    """NeMo Gym's response for a played episode (``NeMoGymResponse``, validated, as JSON-ready data).

    A failed episode (``reward`` None) with no model turn gets one placeholder turn (the episode's prompt, the EOS
    token, log-prob 0), marked with :data:`PLACEHOLDER_KEY` in the metadata: the row is masked (:func:`failure_fields`)
    and NeMo RL needs a token-bearing item even to drop it."""
    result = finished.result
    turns, _ = gym_turns(finished.trajectory)
    tokenizer = load_tokenizer(str(config.tokenizer_path)) if turns or reward is None else None
    placeholder = reward is None and not turns
    if placeholder:
        eos = tokenizer.eos_token_id
        turns = [TurnTokens(tuple(finished.trajectory.prompt_ids), (eos,), (0.0,))]
    output = []
    for n, turn in enumerate(turns):
        text = tokenizer.decode(list(turn.generation_token_ids), skip_special_tokens=False) if tokenizer else ""
        output.append(
            NeMoGymResponseOutputMessageForTraining(
                id=f"msg_{n}",
                content=[NeMoGymResponseOutputText(annotations=[], text=text)],
                prompt_token_ids=list(turn.prompt_token_ids),
                generation_token_ids=list(turn.generation_token_ids),
                generation_log_probs=list(turn.generation_log_probs),
            )
        )
    response = NeMoGymResponse(
        id=f"tau-{task_name(result).replace('/', '-')}-{int(time.time() * 1000)}",
        created_at=int(time.time()),
        model=model,
        object="response",
        output=output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        metadata={
            "tau_task": task_name(result),
            "tau_status": result.termination.status.value,
            "tau_termination": result.termination.value,
            "tau_reward": "" if reward is None else repr(float(reward)),
            **({PLACEHOLDER_KEY: "true"} if placeholder else {}),
        },
    )
    return response.model_dump(mode="json", exclude_none=True)


def tau_fields(finished: FinishedEpisode) -> dict[str, Any]:
    """τ's fields beside NeMo Gym's: the task, how it ended, and what ``turns.run_trajectory`` needs."""
    result = finished.result
    _, tail = gym_turns(finished.trajectory)
    return {
        "tau_task": task_name(result),
        "tau_status": result.termination.status.value,
        "tau_termination": result.termination.value,
        "tau_error": result.error,
        "tau_num_turns": result.num_turns,
        "tau_prompt_len": len(finished.trajectory.prompt_ids),
        "tau_tail_ids": list(tail),
    }


def failure_fields(result: EpisodeResult, instance_config: Any = None) -> dict[str, Any]:
    """How a rollout that must not train is dropped, by each consumer's own means; nothing for one that trains.

    NeMo RL: a numeric reward and ``instance_config.mask_sample`` (the row's ``instance_config``, if any, kept);
    Gym 0.5.1's top-level ``mask_sample``; NeMo Gym's rollout collection: ``_ng_failure_class`` (its failures file).
    """
    termination = result.termination
    if termination.is_trainable:
        return {}
    if termination.is_cut_off:
        routing: dict[str, Any] = {NG_FAILURE_CLASS_KEY: "timeout_exceeded", NG_TERMINAL_KEY: True}
    elif termination in (TerminationReason.USER_ERROR, TerminationReason.POLICY_ERROR):
        routing = {NG_FAILURE_CLASS_KEY: "transient"}
    else:
        routing = {NG_FAILURE_CLASS_KEY: "legitimate"}
    config = dict(instance_config) if isinstance(instance_config, dict) else {}
    masked = {"reward": FAILED_REWARD, MASK_SAMPLE_KEY: True, "instance_config": {**config, MASK_SAMPLE_KEY: True}}
    return {**routing, **masked}
