"""slime entry point: ``--custom-generate-function-path slime_tau_plugin.adapters.slime.generate.generate``.

The only module that knows slime's ``Sample``. It reads :class:`TauConfig` from ``args``, runs one
episode (``engine.run_episode``) on the process's resources for that config (``resources.py``, built
once, off the loop) with the config's policy client, and writes the result into the *same* Sample (through
``append_response_tokens`` when the class has it, so slime's own top-p/weight-version/cache bookkeeping
holds). It is the failure boundary: an external failure, or a required setting that is absent, becomes a
FAILED sample with the reason in ``metadata["error"]``, never an exception into slime. Wrong values
(an unknown ``tau_*`` key or domain) raise :class:`ConfigError` at once. slime's partial rollout: an aborted
episode is suspended into its sample and resumed from it (``partial.py``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from slime_tau_plugin.adapters.slime.partial import abort_tally, offpolicy_tokens, stale_mask, stored_state, suspends
from slime_tau_plugin.engine.config import TauConfig
from slime_tau_plugin.engine.data import task_ref_from_sample
from slime_tau_plugin.engine.episode import EpisodeResult
from slime_tau_plugin.engine.episode_state import METADATA_KEY, EpisodeState
from slime_tau_plugin.engine.errors import ConfigError, MissingSettingError, ResumeError
from slime_tau_plugin.engine.outcome import failed_result, trainable_trajectory, training_reward
from slime_tau_plugin.engine.policy import require_policy_url
from slime_tau_plugin.engine.process import process_registry
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.engine.runner import AbortCheck, run_episode
from slime_tau_plugin.engine.trajectory import Trajectory

logger = logging.getLogger(__name__)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    """Play the sample's τ task and fill the sample in place; returns the same object.

    With ``--partial-rollout`` an episode slime aborts is suspended into the sample and resumed when slime
    hands the sample back (``partial.py``).

    Raises:
        ConfigError: a ``tau_*`` key or value is wrong.
    """
    config = TauConfig.from_args(args)
    await play_sample(config, sample, sampling_params, evaluation=evaluation, args=args)
    return sample


async def play_sample(
    config: TauConfig, sample: Any, sampling_params: dict[str, Any], *, evaluation: bool = False, args: Any = None
) -> None:
    """Play the sample's task with the config's policy and fill the sample (slime's ``generate``, the CLI).

    The process's resources for ``config`` come from their one cache (built off the loop on first use).
    A required setting that is absent makes a FAILED sample; any other failure before the episode starts
    too (the failure boundary). ``args`` is slime's (``append_response_tokens`` reads it; None elsewhere).

    Raises:
        ConfigError: a setting is present but unusable (a tokenizer path that holds none, a parser name).
    """
    try:
        require_policy_url(config)
        resources = await EpisodeResources.for_config(config)
    except MissingSettingError as exc:
        _log_missing_once(str(exc))
        fill_sample(args, sample, failed_result(config, exc), None, config, evaluation=evaluation)
        return
    except ConfigError:
        raise
    except Exception as exc:  # the failure boundary: an unexpected build failure is a FAILED sample too
        logger.exception("slime-tau-plugin could not build its resources for %r", config)
        fill_sample(args, sample, failed_result(config, exc), None, config, evaluation=evaluation)
        return
    session_id = getattr(sample, "session_id", None)
    headers = {"X-SMG-Routing-Key": str(session_id)} if config.routing_key_header and session_id else None
    resume = None
    try:
        ref = task_ref_from_sample(getattr(sample, "prompt", None), getattr(sample, "metadata", None), config)
        resume = stored_state(args, sample)
        result = await run_episode(
            resources,
            resources.policy,
            ref,
            dict(sampling_params),  # slime shares one dict across eval samples
            session_id=session_id,
            headers=headers,
            should_abort=slime_abort_check(args),
            resume=resume,
            suspend=suspends(args) and not evaluation,
        )
    except ResumeError as exc:
        result = failed_result(config, exc, getattr(resume, "task_ref", None))
    except Exception as exc:  # the failure boundary: nothing reaches slime
        logger.exception("episode for sample index=%s failed before it started", getattr(sample, "index", None))
        result = failed_result(config, exc)
    abort_tally().note(result)
    fill_sample(args, sample, result, resources.tokenizer, config, evaluation=evaluation, resumed=resume)


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


def fill_sample(
    args: Any,
    sample: Any,
    result: EpisodeResult,
    tokenizer: Any,
    config: TauConfig,
    *,
    evaluation: bool = False,
    resumed: EpisodeState | None = None,
) -> None:
    """Write an episode into slime's Sample (DESIGN §4 invariants hold on return).

    A resumed episode keeps the response the sample already holds (slime may have zeroed its mask:
    ``--mask-offpolicy-in-partial-rollout``) and appends what this step added; a suspended one keeps its
    trainable ids and leaves its state in ``metadata["tau_episode_state"]``.
    """
    traj = trainable_trajectory(result, tokenizer)
    termination = result.termination
    kept = len(resumed.segments) if resumed is not None and result.trajectory is traj else 0
    held_mask = list(getattr(sample, "loss_mask", None) or []) if kept else []
    if hasattr(sample, "append_response_tokens"):
        if not kept:
            _reset_response(sample, traj)
        for seg in traj.segments[kept:]:
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
    if kept or config.max_weight_lag is not None:
        ours = stale_mask(traj, config.max_weight_lag)
        mask = [min(a, b) for a, b in zip(held_mask, ours, strict=False)] + ours[len(held_mask) :]
        sample.loss_mask = mask  # DESIGN §4: a masked id's log-prob is 0.0, whoever masked it
        sample.rollout_log_probs = [lp if m else 0.0 for lp, m in zip(sample.rollout_log_probs, mask, strict=True)]
    sample.response = tokenizer.decode(traj.response_ids, skip_special_tokens=False) if tokenizer is not None else ""
    sample.status = type(sample).Status[termination.status.name]
    sample.reward = training_reward(result, config, evaluation=evaluation)
    if termination.is_removed or hasattr(sample, "remove_sample"):  # slime drops it (and an abort itself)
        sample.remove_sample = termination.is_removed  # a sample slime hands back (partial rollout) starts clean
    if hasattr(sample, "non_generation_time"):  # slime's rollout perf metrics subtract it from the step time
        sample.non_generation_time = result.timings.env_s + result.timings.user_s
    meta = episode_metadata(result, config)
    if config.reward_shaping > 0:
        meta["task_reward"] = float(result.reward)  # τ's own reward: pass rates are computed from it
    if result.trajectory is not None:
        meta["tau_model_tokens"] = result.trajectory.num_trainable
        meta["tau_offpolicy_tokens"] = offpolicy_tokens(result.trajectory)
        versions = (seg.weight_version for seg in result.trajectory.segments)
        meta["tau_weight_versions"] = [v for v in versions if v is not None]
    merged = {**(getattr(sample, "metadata", None) or {}), **meta}
    merged.pop(METADATA_KEY, None)
    if result.state is not None:
        merged[METADATA_KEY] = result.state.to_json()
    sample.metadata = merged


def episode_metadata(result: EpisodeResult, config: TauConfig) -> dict[str, Any]:
    """What an RL engineer wants next to each sample: why it ended, counts, reward breakdown, timings."""
    meta: dict[str, Any] = {
        "termination_reason": result.termination.value,
        "num_turns": result.num_turns,
        **result.counters.as_dict(),
        "template_mode": result.template_mode,
        "tools_in_prompt": result.tools_in_prompt,
        "reward_info": result.reward_info,
        **result.timings.as_metadata(),
        **result.net_info,
        **result.env_info,
    }
    if result.error:
        meta["error"] = result.error
    if result.failed_endpoint is not None:
        meta["failed_endpoint"] = result.failed_endpoint.value  # the failure guard reads it (group_filter.py)
    if config.record_messages:
        meta["messages"] = list(result.messages)
        meta["tools"] = list(result.tools)
    return meta


def _log_missing_once(message: str) -> None:
    if process_registry().first_time("generate: missing setting", message):
        logger.error("slime-tau-plugin cannot run episodes, every sample is FAILED: %s", message)


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
