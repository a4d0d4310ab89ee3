"""slime entry point: ``--custom-generate-function-path slime_tau_plugin.generate.generate``.

The only module that knows slime's ``Sample``. It reads :class:`TauConfig` from ``args``, runs one
episode with the cached agent, and writes the result into the *same* Sample (through
``append_response_tokens`` when the class has it, so slime's own top-p/weight-version/cache bookkeeping
holds). It is the failure boundary: an external failure becomes a FAILED sample with the reason in
``metadata["error"]``, never an exception into slime. Configuration mistakes (which would fail every
sample) raise :class:`ConfigError` at once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .agent import EpisodeResult, TerminationReason, TrainableToolCallingAgent, agent_factory
from .config import TauConfig
from .data import task_ref_from_sample
from .envs import TaskRef
from .errors import ConfigError
from .trajectory import Trajectory

logger = logging.getLogger(__name__)

_agents: dict[str, TrainableToolCallingAgent] = {}
_lock = threading.Lock()

_STATUS_BY_TERMINATION = {
    TerminationReason.USER_STOP: "COMPLETED",
    TerminationReason.AGENT_STOP: "COMPLETED",
    TerminationReason.MAX_TURNS: "TRUNCATED",
    TerminationReason.BUDGET: "TRUNCATED",
    TerminationReason.LENGTH: "TRUNCATED",
    TerminationReason.CONTEXT_LENGTH: "TRUNCATED",
    TerminationReason.ABORTED: "ABORTED",
    TerminationReason.ENV_ERROR: "FAILED",
    TerminationReason.USER_ERROR: "FAILED",
    TerminationReason.POLICY_ERROR: "FAILED",
}


def get_agent(config: TauConfig) -> TrainableToolCallingAgent:
    """One agent (HTTP client, tokenizer, τ backend) per distinct config, shared by all samples."""
    key = repr(config)
    with _lock:
        agent = _agents.get(key)
        if agent is None:
            agent = _agents[key] = agent_factory(config)
            logger.info("slime-tau-plugin ready: %r", config)
        return agent


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    """Play the sample's τ task and fill the sample in place; returns the same object.

    Raises:
        ConfigError: ``--partial-rollout`` is on, or the ``tau_*`` config / tokenizer cannot work.
    """
    if getattr(args, "partial_rollout", False):
        raise ConfigError(
            "--partial-rollout is not supported by slime_tau_plugin: a τ episode (environment state, simulated "
            "user) cannot be paused and resumed; remove --partial-rollout"
        )
    config = TauConfig.from_args(args)
    agent = get_agent(config)
    params = dict(sampling_params)  # slime shares one dict across eval samples
    session_id = getattr(sample, "session_id", None)
    headers = {"X-SMG-Routing-Key": str(session_id)} if config.routing_key_header and session_id else None
    try:
        ref = task_ref_from_sample(getattr(sample, "prompt", None), getattr(sample, "metadata", None), config)
        result = await agent.run_episode(ref, params, session_id=session_id, headers=headers)
    except Exception as exc:  # the failure boundary: nothing reaches slime
        logger.exception("episode for sample index=%s failed before it started", getattr(sample, "index", None))
        ref = TaskRef(config.benchmark, config.domain, config.split, "?")
        result = EpisodeResult(ref, TerminationReason.ENV_ERROR, None, error=f"{type(exc).__name__}: {exc}")
    fill_sample(args, sample, result, agent.tokenizer, config)
    return sample


def fill_sample(args: Any, sample: Any, result: EpisodeResult, tokenizer: Any, config: TauConfig) -> None:
    """Write an episode into slime's Sample (DESIGN §4 invariants hold on return)."""
    traj = _ensure_response(result.trajectory, tokenizer)
    status = _STATUS_BY_TERMINATION[result.termination]
    if status == "FAILED":  # an episode cut short by a failure must not train, even before slime drops it
        traj = traj.without_training()
    if hasattr(sample, "append_response_tokens"):
        _reset_response(sample, traj)
        for seg in traj.segments:
            sample.append_response_tokens(
                args,
                tokens=list(seg.ids),
                log_probs=list(seg.log_probs) if seg.is_trainable else None,
                trainable=seg.is_trainable,
                meta_info=seg.meta_info,
            )
    else:
        sample.tokens = traj.ids
        sample.response_length = traj.response_length
        sample.loss_mask = traj.loss_mask
        sample.rollout_log_probs = traj.rollout_log_probs
    sample.response = tokenizer.decode(traj.response_ids, skip_special_tokens=False)
    sample.status = getattr(type(sample).Status, status)
    sample.reward = float(result.reward)
    if status == "FAILED":
        sample.remove_sample = True
    sample.metadata = {**(getattr(sample, "metadata", None) or {}), **episode_metadata(result, config)}


def episode_metadata(result: EpisodeResult, config: TauConfig) -> dict[str, Any]:
    """What an RL engineer wants next to each sample: why it ended, counts, reward breakdown, errors."""
    meta: dict[str, Any] = {
        "termination_reason": result.termination.value,
        "num_turns": result.num_turns,
        **result.counters,
        "reward_info": result.reward_info,
        "episode_wall_s": round(result.wall_s, 4),
        **result.env_info,
    }
    if result.error:
        meta["error"] = result.error
    if config.record_messages:
        meta["messages"] = result.messages
        meta["tools"] = result.tools
    return meta


def _ensure_response(traj: Trajectory | None, tokenizer: Any) -> Trajectory:
    """slime needs ``response_length >= 1``: a failed episode gets one non-trainable end-of-text id."""
    filler = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    if traj is None:
        traj = Trajectory((filler,))
    if traj.response_length == 0:
        traj.add_continuation([filler])
    return traj


def _reset_response(sample: Any, traj: Trajectory) -> None:
    """Start from the prompt so appends rebuild every response field (a re-generated sample stays exact)."""
    sample.tokens = list(traj.prompt_ids)
    sample.response = ""
    sample.response_length = 0
    sample.loss_mask = None
    sample.rollout_log_probs = None
    for name in ("rollout_top_p_token_ids", "rollout_top_p_token_offsets", "rollout_routed_experts"):
        if hasattr(sample, name):
            setattr(sample, name, None)
    if hasattr(sample, "weight_versions"):
        sample.weight_versions = []
