"""verl entry point: ``TauAgentLoop``, an agent loop (``agent_name: tau_agent``) on the same episode engine.

verl (0.9.1, ``actor_rollout_ref.rollout.mode=async``) builds one loop per dataset row from the entry in
``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (``configs/verl/tau_agent_loop.yaml``) and awaits
``run(sampling_params, **row)``. The row's ``extra_info`` names the task (``rows.verl_rows``); the loop
plays it through the engine's one failure boundary (``engine.loop.boundary.play_episode``) on the
process's resources for its config and verl's tokenizer (``EpisodeResources.for_config``), injecting a
``VerlPolicy`` (``policy.py``) over verl's server manager per sample, and returns verl's
``AgentLoopOutput``. Only this module knows verl; ``import slime_tau_plugin`` never imports it.

Settings, lowest precedence first: ``TauConfig`` defaults; the ``tau_*`` keys of the agent-loop YAML entry
(the keys of slime's ``--custom-config-path`` YAML, which verl passes to the constructor); the trainer
config's top-level ``tau`` section (``+tau.user_base_url=...`` on verl's command line, field names without
the prefix); then verl's own limits, as its ``ToolAgentLoop`` applies them: the whole response (model turns
and tool/user text) fits ``rollout.response_length`` (``max_response_len``), prompt + response fit
``rollout.prompt_length + rollout.response_length`` and ``rollout.max_model_len`` (``max_context_len``),
``multi_turn.max_assistant_turns`` caps ``max_turns``, ``data.apply_chat_template_kwargs.enable_thinking``
is used when ``tau_enable_thinking`` is unset; verl's other ``multi_turn`` knobs are refused where τ's loop would not
apply them (``multi_turn.py``). A prompt longer than ``rollout.prompt_length`` cannot be
padded into verl's batch: that episode stops before its first turn and does not train.

Outcomes: verl has no ``remove_sample``, so an episode that must not train (an env, user-simulator or policy
failure, an engine abort, an unusable row) is returned with ``response_mask`` and log-probs all 0 and
``reward_score`` 0.0: it adds no gradient (verl's loss aggregations skip fully masked rows), and the ``tau_<name>``
estimators (``advantage.py``) keep its 0 out of its group's mean and std. ``extra_fields["error"]`` and
``failed_endpoint`` say why. A wrong setting raises ``ConfigError``; under the batch trainer
(``trainer.use_v1=false``) the failure guard's ``FailureGuardError`` stops the run (``guard.py``); under V1 the
τ's sampler in verl's own trainer runs the guard (``sampler.py``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from slime_tau_plugin.adapters.verl.guard import guard_batch_path
from slime_tau_plugin.adapters.verl.multi_turn import check_multi_turn
from slime_tau_plugin.adapters.verl.policy import VerlEpisodeSummary, VerlPolicy
from slime_tau_plugin.adapters.verl.recipes import refuse_recipes
from slime_tau_plugin.adapters.verl.rows import AGENT_NAME, is_evaluation, task_ref_from_extra_info
from slime_tau_plugin.engine.config.keys import Trainer
from slime_tau_plugin.engine.config.tau_config import TauConfig, coerce_field, known_key, refuse_unread
from slime_tau_plugin.engine.episode.request import EpisodeOptions, EpisodeRequest
from slime_tau_plugin.engine.episode.result import EpisodeResult, SampleStatus
from slime_tau_plugin.engine.errors import ConfigError, FailedEndpoint
from slime_tau_plugin.engine.loop.blocking import run_blocking
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.engine.net.retry import RetrySettings
from slime_tau_plugin.engine.outcome import trainable_trajectory
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.reporting.user_share import USER_SHARE_KEYS

logger = logging.getLogger(__name__)

EXTRA_FIELD_KEYS = (
    "tau_task", "status", "termination_reason", "model_turns", "tool_call_counts", "tool_errors", "parse_errors",
    "template_fallbacks", "user_tool_errors", "template_mode", "tau_reward", "reward_info", "error", "failed_endpoint",
    "tau_package", "tau_version",
    "episode_wall_s", "time_policy_s", "time_env_s", "time_user_s", "min_global_steps", "max_global_steps",
    "messages", "tools", "reward_extra_info", "tau_review", "tau_user_cost", "tau_user_share",
)  # fmt: skip
"""Every output has exactly these: verl concatenates workers' batches and needs one key set. ``tool_call_counts`` is
the episode's tool calls under the name verl's ``compute_data_metrics`` reads (``tool_call_counts/mean``);
``tau_review`` is the customer review's verdict (slime's ``metadata["tau_review"]``; None when not reviewed) and
``tau_user_cost`` what the customer cost (``CustomerCost.as_metadata``); ``tau_user_share`` the customer requests its
exact-request cache answered and its GRPO group's shared opening saved (``reporting/user_share.py``'s counts)."""

ROUTED_SHAPES = "verl: routed-experts shape by model"
"""The process registry's notes topic: (layers, experts per token) and dtype of the routed experts a model's
server returned, for the zero arrays of failed outputs (``process.py``)."""
HF_ROUTING_SHAPES = "verl: routing shape from the model's Hugging Face config"
"""The notes topic of (layers, experts per token) read from a model's config (``run`` reads it off the loop)."""


def verl_tau_config(trainer_config: Any, loop_settings: Mapping[str, Any]) -> TauConfig:
    """``TauConfig`` from the agent-loop YAML entry's ``tau_*`` keys, the trainer's ``tau`` section and verl's
    limits (see the module docstring).

    Raises:
        ConfigError: an unknown key (the closest valid one is named), one verl does not read (``keys.KEY_READERS``:
            a setting verl provides, or another trainer's), or a bad value.
    """
    refuse_recipes(trainer_config)
    fields = TauConfig.field_names()
    values: dict[str, Any] = {}
    for key, value in loop_settings.items():
        values[known_key(key.removeprefix("tau_"), f"agent-loop YAML key {key}", fields, "tau_")] = value
    section = trainer_config.get("tau")
    if section is not None:
        from omegaconf import OmegaConf

        for key, value in OmegaConf.to_container(section, resolve=True).items():
            values[known_key(key, f"trainer config key tau.{key}", fields, "tau.")] = value
    refuse_unread(values, Trainer.VERL)
    rollout = trainer_config.actor_rollout_ref.rollout
    check_multi_turn(rollout.get("multi_turn"))
    response_len = int(rollout.response_length)
    context_len = int(rollout.prompt_length) + response_len
    if rollout.get("max_model_len"):
        context_len = min(context_len, int(rollout.max_model_len))
    values["max_context_len"] = min(_own(values, "max_context_len") or context_len, context_len)
    values["max_response_len"] = min(_own(values, "max_response_len") or response_len, response_len)
    max_assistant_turns = rollout.get("multi_turn", {}).get("max_assistant_turns")
    if max_assistant_turns:
        values["max_turns"] = min(_own(values, "max_turns") or int(max_assistant_turns), int(max_assistant_turns))
    if values.get("enable_thinking") is None:
        template_kwargs = trainer_config.get("data", {}).get("apply_chat_template_kwargs") or {}
        if template_kwargs.get("enable_thinking") is not None:
            values["enable_thinking"] = bool(template_kwargs["enable_thinking"])
    return TauConfig(**values)


def _own(values: dict[str, Any], name: str) -> Any:
    """Our setting ``name`` as its type (a quoted number in the YAML is coerced or refused here)."""
    value = values.get(name)
    return None if value is None else coerce_field(name, value)


@register(AGENT_NAME)
class TauAgentLoop(AgentLoopBase):
    """Plays the row's τ task; returns token-exact ids, mask 1 only on sampled ids, τ's reward."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        loop_settings = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("tau_")}
        super().__init__(*args, **kwargs)
        self.tau_config = verl_tau_config(self.config, loop_settings)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        """Play one episode; never raises for an external failure or a bad row (see the module docstring), except
        the failure guard's stop under the batch trainer (``FailureGuardError``, by design)."""
        config = self.tau_config
        policy = VerlPolicy(
            self.server_manager,
            self._request_id(row.get("priority", 0)),
            max_prompt_len=self.prompt_length,
            stop_token_ids=_stop_ids(self.tokenizer, sampling_params),
            timeout_s=config.policy_timeout_s,
            retry=RetrySettings(attempts=config.policy_retries),
        )
        options = EpisodeOptions(session_id=policy.request_id, group=_group_of(row))
        request = EpisodeRequest(policy.request_id, None, {}, sampling_params, options)
        played = await play_episode(  # the one failure boundary: nothing but a ConfigError reaches verl
            config,
            request,
            task=lambda: task_ref_from_extra_info(row.get("extra_info"), config),
            policy=policy,
            tokenizer=self.tokenizer,
        )
        if played.resources is not None and self.rollout_config.get("enable_rollout_routing_replay"):
            await self._read_hf_routing_shape()
        output = self.to_output(played.result, policy.summary(), dispatched_steps=row.get("global_steps"))
        if not self.config.trainer.get("use_v1", False):
            guard_batch_path(self.tau_config, self.config, output.extra_fields)
        return output

    async def _read_hf_routing_shape(self) -> None:
        """The model's routing shape from its Hugging Face config, read once per process in a worker thread:
        a file read and a config parse on verl's event loop would stall every other sample."""
        model, notes = self._model_path(), shared_state().notes(HF_ROUTING_SHAPES)
        if model not in notes:
            notes[model] = await run_blocking(_hf_routing_shape, model, timeout=60.0)

    def _model_path(self) -> str:
        return str(self.config.actor_rollout_ref.model.get("path", ""))

    def _request_id(self, priority: Any) -> str:
        """verl's own choice (``ToolAgentLoop._make_request_id``): stable under full determinism, else random."""
        return f"det-{priority}" if self.rollout_config.get("full_determinism") else uuid.uuid4().hex

    def to_output(
        self, result: EpisodeResult, summary: VerlEpisodeSummary, *, dispatched_steps: Any = None
    ) -> AgentLoopOutput:
        """An :class:`EpisodeResult` as verl's output; an episode that must not train keeps mask and reward 0.

        ``dispatched_steps`` is the row's ``global_steps`` (the weights version the trainer dispatched it at):
        the weight versions of an episode that generated no turn, because V1 casts them to ``int`` every step.
        """
        error, trains = result.error, result.termination.is_trainable
        traj = trainable_trajectory(result, self.tokenizer)  # never empty: verl puts the reward on the last id
        prompt_ids = list(traj.prompt_ids)
        if len(prompt_ids) > self.prompt_length:  # only when the episode never reached its first turn
            trains = False
            error = error or f"the prompt has {len(prompt_ids)} tokens, more than rollout.prompt_length"
            prompt_ids = prompt_ids[-self.prompt_length :]
            traj = traj.without_training()
        if not trains:
            error = error or "the engine aborted a turn: the episode is not trained"
        response_ids, mask, log_probs = traj.response_ids, traj.loss_mask, traj.rollout_log_probs
        n = self.response_length  # the engine's budget keeps within it; cut as ToolAgentLoop does otherwise
        response_ids, mask, log_probs = response_ids[:n], mask[:n], log_probs[:n]
        reward = float(result.reward) if trains else 0.0
        timings = result.timings
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=log_probs,
            routed_experts=self._routed_experts(summary, len(prompt_ids) + len(response_ids), trains),
            reward_score=reward,
            num_turns=1 + len(traj.segments),  # verl's count: the prompt, each generation, each reply round
            metrics=AgentLoopMetrics(
                generate_sequences=timings.policy_s,
                tool_calls=timings.env_s + timings.user_s,  # τ's reward runs among the env calls
                num_preempted=summary.num_preempted,
            ),
            extra_fields=self._extra_fields(result, summary, reward, trains, error, dispatched_steps),
        )

    def _extra_fields(
        self,
        result: EpisodeResult,
        summary: VerlEpisodeSummary,
        reward: float,
        trains: bool,
        error: str | None,
        dispatched_steps: Any,
    ) -> dict[str, Any]:
        c, task = result.counters, result.task
        status, failed_endpoint = result.termination.status, result.failed_endpoint
        if not trains and result.termination.is_trainable:  # cut by verl's prompt length
            status, failed_endpoint = SampleStatus.FAILED, FailedEndpoint.CONFIG
        record = self.tau_config.record_messages
        low, high = _weight_versions(summary, dispatched_steps)
        is_customer_error = result.review is not None and result.review.excluded  # left out of pass^k, counted
        return {
            "tau_task": f"{task.benchmark}/{task.domain}/{task.split}/{task.task_id}",
            "status": status.value,
            "termination_reason": result.termination.value,
            "model_turns": result.num_turns,
            "tool_call_counts": c.tool_calls,
            "tool_errors": c.tool_errors,
            "parse_errors": c.parse_errors,
            "template_fallbacks": c.template_fallbacks,
            "user_tool_errors": c.user_tool_errors,
            "template_mode": result.template_mode,
            "tau_reward": reward,
            "reward_info": result.reward_info,
            "error": error,
            "failed_endpoint": failed_endpoint.value if failed_endpoint is not None else None,
            "tau_package": result.env_info.get("tau_package"),
            "tau_version": result.env_info.get("tau_version"),
            **result.timings.as_metadata(),
            "min_global_steps": low,
            "max_global_steps": high,
            "messages": list(result.messages) if record else None,
            "tools": list(result.tools) if record else None,
            # verl turns these into per-data-source validation metrics (val-core/<source>/acc/mean@N, best@N...)
            "reward_extra_info": {
                "acc": float(reward >= 1.0 - 1e-6),
                "model_turns": result.num_turns,
                "tool_call_counts": c.tool_calls,
                "parse_errors": c.parse_errors,
                "failed": float(not trains),
                "customer_error": float(is_customer_error),
            },
            "tau_review": result.review.as_metadata() if result.review is not None else None,
            "tau_user_cost": result.cost.as_metadata(),
            "tau_user_share": {key: int(result.net_info.get(key) or 0) for key in USER_SHARE_KEYS},
        }

    def _routed_experts(self, summary: VerlEpisodeSummary, total: int, trains: bool) -> Any:
        """The newest turn's routed experts; zeros when there are none but routing replay is on (verl
        concatenates the batch's arrays, so every output needs one)."""
        if not self.rollout_config.get("enable_rollout_routing_replay"):
            return None
        import numpy as np

        model = self._model_path()
        routed, shapes = summary.routed_experts, shared_state().notes(ROUTED_SHAPES)
        if routed is not None:
            shapes[model] = (tuple(routed.shape[1:]), np.asarray(routed[:1]).dtype)
            if trains:
                return routed[:total]
        shape, dtype = shapes.get(model) or (shared_state().notes(HF_ROUTING_SHAPES).get(model), np.int32)
        return np.zeros((total, *shape), dtype=dtype) if shape else None


def _weight_versions(summary: VerlEpisodeSummary, dispatched_steps: Any) -> tuple[int, int]:
    """(min, max) weight versions of the episode's turns; with no turn, the row's dispatch step (else verl's
    "unknown", -1): V1 casts both with ``np.array(..., dtype=int)`` and the fully-async recipe subtracts them."""
    try:
        fallback = int(dispatched_steps)  # an int, a numpy or 0-d tensor value from verl's batch
    except (TypeError, ValueError):
        fallback = -1
    low = summary.min_global_steps if summary.min_global_steps is not None else fallback
    high = summary.max_global_steps if summary.max_global_steps is not None else low
    return int(low), int(high)


def _hf_routing_shape(model_path: str) -> tuple[int, ...] | None:
    """(layers, experts per token) from the model's Hugging Face config, for a zero routed-experts array."""
    try:
        from transformers import AutoConfig

        hf = AutoConfig.from_pretrained(model_path, local_files_only=True)
        return (int(hf.num_hidden_layers), int(hf.num_experts_per_tok))
    except Exception as exc:
        logger.warning("cannot read num_hidden_layers/num_experts_per_tok from %r: %s", model_path, exc)
        return None


def _stop_ids(tokenizer: Any, sampling_params: Mapping[str, Any]) -> set[int]:
    """Ids that end a turn: a turn that used all ``max_new_tokens`` and ends on one of them is not cut."""
    ids = {int(t) for t in sampling_params.get("stop_token_ids") or ()}
    eos = getattr(tokenizer, "eos_token_id", None)
    ids.update([eos] if isinstance(eos, int) else list(eos or ()))
    return ids


def trainer_tau_config(trainer_config: Any) -> TauConfig:
    """The ``TauConfig`` the agent loops of this trainer config build (its agent-loop YAML's ``tau_agent`` entry,
    the ``tau`` section, verl's limits): what the trainer process reads (``sampler.py``).

    Raises:
        ConfigError: no ``tau_agent`` entry in ``agent_loop_config_path``, or a bad setting.
    """
    from omegaconf import OmegaConf

    from slime_tau_plugin.adapters.verl.agent_loop import verl_tau_config

    path = trainer_config.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if not path or not Path(path).is_file():
        raise ConfigError(f"actor_rollout_ref.rollout.agent.agent_loop_config_path={path!r} is not a file")
    entries = [e for e in OmegaConf.load(path) if e.get("name") == AGENT_NAME]
    if not entries:
        raise ConfigError(f"{path}: no entry named {AGENT_NAME}")
    items = OmegaConf.to_container(entries[0], resolve=True).items()
    return verl_tau_config(trainer_config, {k: v for k, v in items if str(k).startswith("tau_")})


def _group_of(row: dict[str, Any]) -> str | None:
    """The row's GRPO group: verl's ``uid``, one per prompt, copied into its ``rollout.n`` repeats; None for an
    evaluation row (``rows.EVAL_MARK``: verl does not tell an agent loop whether it validates), so the customer's
    shared opening (``tau_user_shared_opening``, training only) never reaches validation."""
    uid = row.get("uid")
    return None if uid is None or is_evaluation(row.get("extra_info")) else f"verl:{uid}"
