"""slime entry point: ``--custom-generate-function-path slime_tau_plugin.adapters.slime.generate.generate``.

The only module that knows slime's ``Sample``. It reads :class:`TauConfig` from ``args``, turns the sample into an
``EpisodeRequest`` (written once, options and all), has it played (the engine's failure boundary: in this process on
its resources for that config, or in worker processes / Ray actors with ``tau_episode_workers``) and writes the
result into the *same* Sample (through ``append_response_tokens`` when the class has it, so slime's own
top-p/weight-version/cache bookkeeping holds). It is the failure boundary: an external failure, or a required
setting that is absent, becomes a FAILED sample with the reason in ``metadata["error"]``, never an exception into
slime. Wrong values (an unknown ``tau_*`` key or domain) raise :class:`ConfigError` at once. slime's partial
rollout: an aborted episode is suspended into its sample and resumed from it (``partial.py``).
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.adapters.slime.metrics import eval_clock
from slime_tau_plugin.adapters.slime.partial import abort_tally, offpolicy_tokens, stale_mask, stored_state, suspends
from slime_tau_plugin.adapters.slime.weight_lag import SPANS_KEY, version_spans
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.cost import COST_KEY
from slime_tau_plugin.engine.episode.request import AbortCheck, EpisodeOptions, EpisodeRequest, HeldTokens, StoredState
from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.episode.state import METADATA_KEY
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.engine.outcome import training_reward
from slime_tau_plugin.engine.workers.messages import FinishedEpisode
from slime_tau_plugin.engine.workers.play import finish_episode
from slime_tau_plugin.engine.workers.registry import pool_for


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    """Play the sample's τ task and fill the sample in place; returns the same object.

    With ``--partial-rollout`` an episode slime aborts is suspended into the sample and resumed when slime
    hands the sample back (``partial.py``).

    Raises:
        ConfigError: a ``tau_*`` key or value is wrong.
    """
    config = config_from_args(args)
    if evaluation:
        eval_clock().started()  # the eval's wall time, logged by log_eval
    await play_sample(config, sample, sampling_params, evaluation=evaluation, args=args)
    return sample


async def play_sample(
    config: TauConfig, sample: Any, sampling_params: dict[str, Any], *, evaluation: bool = False, args: Any = None
) -> None:
    """Play the sample's task with the config's policy and fill the sample (slime's ``generate``, the CLI).

    The episode runs in this process (the failure boundary ``engine.loop.boundary.play_episode`` on the process's
    resources, built off the loop on first use) or, with ``tau_episode_workers``, in a worker process or Ray actor
    that runs the same functions: this process then only sends the request and fills the sample. Any failure of the
    episode is a FAILED sample (the failure boundary); ``args`` is slime's (``append_response_tokens`` reads it; None
    elsewhere).

    Raises:
        ConfigError: a setting is present but unusable (a tokenizer path that holds none, a parser name).
    """
    request = episode_request(args, sample, sampling_params, config, evaluation=evaluation)
    pool = await pool_for(config)
    if pool is None:
        finished = await finish_episode(await play_episode(config, request))
    else:
        finished = await pool.run(request)
    abort_tally().note(finished.result)
    fill_sample(args, sample, finished, config, evaluation=evaluation)


def episode_request(
    args: Any, sample: Any, sampling_params: dict[str, Any], config: TauConfig, *, evaluation: bool = False
) -> EpisodeRequest:
    """What the sample asks for, written once: a value any process can play (no tokenizer needed), with its options
    (slime's abort check stays in this process)."""
    session_id = getattr(sample, "session_id", None)
    metadata = dict(getattr(sample, "metadata", None) or {})
    metadata.pop(METADATA_KEY, None)
    state = stored_state(args, sample)
    held = HeldTokens.of(list(getattr(sample, "tokens", None) or [])) if state is not None else None
    options = EpisodeOptions(
        session_id=session_id,
        headers={"X-SMG-Routing-Key": str(session_id)} if config.routing_key_header and session_id else None,
        should_abort=slime_abort_check(args),
        resume=StoredState(state, held) if state is not None else None,
        suspend=suspends(args) and not evaluation,
        group=group_of(sample, evaluation=evaluation),
    )
    prompt = getattr(sample, "prompt", None)
    # slime shares one sampling dict across eval samples: the request holds its own
    return EpisodeRequest(uuid.uuid4().hex, prompt, metadata, dict(sampling_params), options)


def group_of(sample: Any, *, evaluation: bool = False) -> str | None:
    """The sample's GRPO group as the engine names it: slime's ``Sample.group_index`` (the data source numbers the
    groups of a run in order and copies it into each of the ``n_samples_per_prompt`` samples); None in evaluation,
    whose trials of a task must stay independent (pass^k)."""
    index = getattr(sample, "group_index", None)
    return None if evaluation or index is None else f"slime:{index}"


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
    args: Any, sample: Any, finished: FinishedEpisode, config: TauConfig, *, evaluation: bool = False
) -> None:
    """Write an episode into slime's Sample (the invariants of docs/ARCHITECTURE.md hold on return).

    A resumed episode keeps the response the sample already holds (slime may have zeroed its mask:
    ``--mask-offpolicy-in-partial-rollout``) and appends what this step added; a suspended one keeps its
    trainable ids and leaves its state in ``metadata["tau_episode_state"]``.
    """
    result, traj, kept = finished.result, finished.trajectory, finished.kept_segments
    termination = result.termination
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
        sample.loss_mask = mask  # invariants (docs/ARCHITECTURE.md): a masked id's log-prob is 0.0, whoever masked it
        sample.rollout_log_probs = [lp if m else 0.0 for lp, m in zip(sample.rollout_log_probs, mask, strict=True)]
    sample.response = finished.response_text
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
        meta[SPANS_KEY] = version_spans(result.trajectory)  # the lag when trained: weight_lag.py
    merged = {**(getattr(sample, "metadata", None) or {}), **meta, **finished.worker}
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
    if result.review is not None:
        meta["tau_review"] = result.review.as_metadata()  # the verdict: tags, severity, the message it points at
    meta[COST_KEY] = result.cost.as_metadata()  # what the customer and its review cost (tau_user/cost_* metrics)
    if config.record_messages:
        meta["messages"] = list(result.messages)
        meta["tools"] = list(result.tools)
        meta["tau_messages"] = list(result.tau_messages)  # τ's own log: what `slime-tau export` writes
    return meta


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
