"""slime entry point: ``--custom-generate-function-path slime_tau_plugin.generate.generate``.

The only module that knows slime's ``Sample``. It reads :class:`TauConfig` from ``args``, runs one
episode with the cached agent, and writes the result into the *same* Sample (through
``append_response_tokens`` when the class has it, so slime's own top-p/weight-version/cache bookkeeping
holds). It is the failure boundary: an external failure, or a required setting that is absent, becomes a
FAILED sample with the reason in ``metadata["error"]``, never an exception into slime. Wrong values
(an unknown ``tau_*`` key or domain, ``--partial-rollout``) raise :class:`ConfigError` at once.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from .agent import AbortCheck, TrainableToolCallingAgent, agent_factory
from .config import TauConfig
from .data import task_ref_from_sample
from .envs import TaskRef
from .episode import EpisodeResult, TerminationReason
from .errors import ConfigError, MissingSettingError
from .trajectory import Trajectory

logger = logging.getLogger(__name__)

_agents: dict[str, TrainableToolCallingAgent] = {}
_missing_logged: set[str] = set()
_lock = threading.Lock()


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
        ConfigError: ``--partial-rollout`` is on, or a ``tau_*`` key or value is wrong.
    """
    if getattr(args, "partial_rollout", False):
        raise ConfigError(
            "--partial-rollout is not supported by slime_tau_plugin: a τ episode (environment state, simulated "
            "user) cannot be paused and resumed; remove --partial-rollout"
        )
    config = TauConfig.from_args(args)
    try:
        agent = get_agent(config)
    except MissingSettingError as exc:
        _log_missing_once(str(exc))
        fill_sample(args, sample, _failed(config, exc), None, config)
        return sample
    params = dict(sampling_params)  # slime shares one dict across eval samples
    session_id = getattr(sample, "session_id", None)
    headers = {"X-SMG-Routing-Key": str(session_id)} if config.routing_key_header and session_id else None
    try:
        ref = task_ref_from_sample(getattr(sample, "prompt", None), getattr(sample, "metadata", None), config)
        result = await agent.run_episode(
            ref, params, session_id=session_id, headers=headers, should_abort=slime_abort_check(args)
        )
    except Exception as exc:  # the failure boundary: nothing reaches slime
        logger.exception("episode for sample index=%s failed before it started", getattr(sample, "index", None))
        result = _failed(config, exc)
    fill_sample(args, sample, result, agent.tokenizer, config)
    return sample


def slime_abort_check(args: Any) -> AbortCheck | None:
    """A between-turns check of slime's rollout abort, or None outside slime.

    slime sets ``GenerateState(args).aborted`` once it has enough groups, aborts the engines and then
    awaits every pending sample: an episode waiting on the env or the user never sees the engine abort.
    ``GenerateState`` is a singleton; it is looked up (never created) only if slime's rollout module is
    already imported, so this costs nothing and imports nothing outside slime.
    """
    module = sys.modules.get("slime.rollout.sglang_rollout")
    state_cls = getattr(module, "GenerateState", None)
    if state_cls is None:
        return None
    instances = getattr(type(state_cls), "_instances", {})

    def aborted() -> bool:
        state = instances.get(state_cls)
        return bool(getattr(state, "aborted", False))

    return aborted


def fill_sample(args: Any, sample: Any, result: EpisodeResult, tokenizer: Any, config: TauConfig) -> None:
    """Write an episode into slime's Sample (DESIGN §4 invariants hold on return)."""
    traj = _ensure_response(result.trajectory, tokenizer)
    termination = result.termination
    if termination.is_failure:  # an episode cut short by a failure must not train, even before slime drops it
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
    sample.response = tokenizer.decode(traj.response_ids, skip_special_tokens=False) if tokenizer is not None else ""
    sample.status = type(sample).Status[termination.status.name]
    sample.reward = float(result.reward)
    if termination.is_failure:
        sample.remove_sample = True
    if hasattr(sample, "non_generation_time"):  # slime's rollout perf metrics subtract it from the step time
        sample.non_generation_time = result.timings.env_s + result.timings.user_s
    sample.metadata = {**(getattr(sample, "metadata", None) or {}), **episode_metadata(result, config)}


def episode_metadata(result: EpisodeResult, config: TauConfig) -> dict[str, Any]:
    """What an RL engineer wants next to each sample: why it ended, counts, reward breakdown, timings."""
    meta: dict[str, Any] = {
        "termination_reason": result.termination.value,
        "num_turns": result.num_turns,
        **result.counters.as_dict(),
        "reward_info": result.reward_info,
        **result.timings.as_metadata(),
        **result.env_info,
    }
    if result.error:
        meta["error"] = result.error
    if config.record_messages:
        meta["messages"] = list(result.messages)
        meta["tools"] = list(result.tools)
    return meta


def _failed(config: TauConfig, exc: BaseException) -> EpisodeResult:
    """An episode that failed before its task was known (the task id is ``?``)."""
    ref = TaskRef(config.benchmark, config.domain, config.split, "?")
    return EpisodeResult(ref, TerminationReason.ENV_ERROR, None, error=f"{type(exc).__name__}: {exc}")


def _log_missing_once(message: str) -> None:
    with _lock:
        if message in _missing_logged:
            return
        _missing_logged.add(message)
    logger.error("slime-tau-plugin cannot run episodes, every sample is FAILED: %s", message)


def _ensure_response(traj: Trajectory | None, tokenizer: Any) -> Trajectory:
    """slime needs ``response_length >= 1``: a failed episode gets one non-trainable end-of-text id."""
    eos = getattr(tokenizer, "eos_token_id", None)
    filler = eos if eos is not None else 0
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
