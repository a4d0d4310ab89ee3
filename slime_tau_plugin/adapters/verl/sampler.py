"""τ's failure guard, step metrics and validation pass^k in verl's V1 trainer, through its custom replay buffer.

verl 0.9's default trainer (``trainer.use_v1: true``) decides what it is by comparing ``trainer.v1.trainer_mode``
with ``"sync"`` (its replay buffer, its refill of failed groups, its checkpointed in-flight prompts...), so τ's
additions cannot be a trainer of another name: they ride verl's own trainer (``sync``, ``colocate_async`` or
``separate_async``) through its public sampler extension point, ``trainer.v1.sampler.custom_sampler`` (a
``ReplayBuffer`` subclass whose ``sample`` returns ``(batch, metrics)``; verl merges the metrics into the step's).
``TauReplayBuffer`` is verl's sync ``ReplayBuffer``, ``TauReplayBufferAsync`` its ``ReplayBufferAsync``; after
verl's own ``sample``:

- training: each prompt group of the step (by its ``uid`` field, read from TransferQueue) is counted by the slime
  path's failure guard before anything trains on it; when it trips, the step's τ numbers go to the log and
  ``FailureGuardError`` stops the run with one line naming the endpoint (V1 settles a failed agent loop without
  stopping, so the guard cannot live in the loop; a step whose every episode failed would otherwise reach verl's
  rollout correction, which raises on a batch without a trainable token). τ's step metrics join verl's
  (``episodes.step_metrics``: ``tau/<benchmark>/<domain>/...``, ``tau/failed/<endpoint>``);
- validation: each task's τ pass^k (k = 1 .. ``val_kwargs.n``, over its episodes that did not fail) is written into
  its rows' ``reward_extra_info`` as ``tau_pass^k``, which verl's own validation reads back and logs per data source
  (``val-aux/<source>/tau_pass^k/mean@n``): every row of a task holds its task's value, so verl's mean is τ's.

verl gives a custom sampler only the base constructor arguments and ``sampler_kwargs``; the guard's settings come
through ``sampler_kwargs.tau_trainer`` (:data:`TRAINER_KWARGS_OVERRIDE`, interpolations of the trainer config's
``data``, ``actor_rollout_ref.rollout`` and ``tau`` sections). The launch script sets all of it (:func:`overrides`).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from slime_tau_plugin.adapters.verl.agent_loop import trainer_tau_config
from slime_tau_plugin.adapters.verl.episodes import (
    EpisodeView,
    episode_view,
    observe_step,
    step_metrics,
    task_pass_k,
    verl_guard_settings,
)
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.reporting.failure_guard import FailureGuard, FailureGuardError

logger = logging.getLogger(__name__)

SAMPLER_PATH = "pkg://slime_tau_plugin.adapters.verl.sampler"
SAMPLERS = {
    "sync": "TauReplayBuffer",
    "colocate_async": "TauReplayBufferAsync",
    "separate_async": "TauReplayBufferAsync",
}
"""verl's trainer mode -> the sampler of that mode's replay buffer with τ's additions."""
TRAINER_KWARGS_OVERRIDE = (
    "+trainer.v1.sampler.sampler_kwargs.tau_trainer={data: ${data}, "
    "actor_rollout_ref: {rollout: ${actor_rollout_ref.rollout}}, tau: ${oc.select:tau,null}}"
)
"""What the sampler reads of the trainer config (verl passes a custom sampler nothing else of it)."""


def overrides(trainer_mode: str = "sync") -> list[str]:
    """verl's command-line overrides that run ``trainer_mode`` with τ's sampler."""
    return [
        "trainer.use_v1=true",
        f"trainer.v1.trainer_mode={trainer_mode}",
        f"trainer.v1.sampler.custom_sampler.path={SAMPLER_PATH}",
        f"trainer.v1.sampler.custom_sampler.name={SAMPLERS[trainer_mode]}",
        TRAINER_KWARGS_OVERRIDE,
    ]


class TauSampling:
    """τ's additions to a verl ``ReplayBuffer`` (see the module docstring)."""

    sampler_kwargs: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        trainer = (self.sampler_kwargs or {}).get("tau_trainer")
        if trainer is None:
            raise ConfigError(
                f"trainer.v1.sampler.sampler_kwargs.tau_trainer is missing; add the override {TRAINER_KWARGS_OVERRIDE}"
            )
        settings = verl_guard_settings(trainer_tau_config(trainer), trainer.data.get("train_batch_size"))
        self.tau_guard = FailureGuard(settings)

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)  # type: ignore[misc]
        keys = [key for key, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding", False)]
        if not keys:
            return batch, metrics
        fields = ["uid", "extra_fields", "response_mask"]
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
        uids = [str(u) for u in data.pop("uid").tolist()]  # as verl reads them (trainer_base._validate)
        extras = data.pop("extra_fields").tolist()
        if partition_id == "val":
            _write_pass_k(keys, batch.partition_id, uids, extras)
            return batch, metrics
        views = [episode_view(e, m.tolist()) for e, m in zip(extras, data["response_mask"].unbind(0), strict=True)]
        found: list[EpisodeView] = [v for v in views if v is not None]
        try:
            observe_step(self.tau_guard, uids, views)
        except FailureGuardError as exc:
            logger.error("%s (step %s τ metrics: %s)", exc, global_steps, json.dumps(step_metrics(found)))
            raise
        return batch, {**metrics, **step_metrics(found)}


def _write_pass_k(keys: list[str], partition_id: str, uids: list[str], extras: list[Any]) -> None:
    """Each row's ``reward_extra_info`` gains its task's ``tau_pass^k`` (see the module docstring)."""
    rows: dict[str, list[int]] = defaultdict(list)
    for row, uid in enumerate(uids):
        rows[uid].append(row)
    written = []
    for row, extra in enumerate(extras):
        if not isinstance(extra, dict) or not isinstance(extra.get("reward_extra_info"), dict):
            written.append(extra)
            continue
        group = [extras[r]["reward_extra_info"] for r in rows[uids[row]] if isinstance(extras[r], dict)]
        info = {**extra["reward_extra_info"], **task_pass_k(group)}
        written.append({**extra, "reward_extra_info": info})
    tq.kv_batch_put(
        keys=keys, partition_id=partition_id, fields=list_of_dict_to_tensordict([{"extra_fields": e} for e in written])
    )


class TauReplayBuffer(TauSampling, ReplayBuffer):
    """verl's sync ``ReplayBuffer`` with τ's guard, step metrics and pass^k (``trainer.v1.trainer_mode=sync``)."""


class TauReplayBufferAsync(TauSampling, ReplayBufferAsync):
    """verl's ``ReplayBufferAsync`` with τ's additions (``colocate_async`` and ``separate_async``)."""
