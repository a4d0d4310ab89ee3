"""verl V1 trainer modes ``tau_sync``, ``tau_colocate_async``, ``tau_separate_async``: verl's own trainers plus τ.

verl 0.9's default trainer (``trainer.use_v1: true``) is chosen by ``trainer.v1.trainer_mode`` from its registry
(``verl.trainer.ppo.v1.register_trainer``). Each mode here is verl's trainer of the same name with two additions,
both in the trainer process, where a whole step's rows are together:

- before the advantages (``_compute_advantage``), each prompt group of the step (its ``extra_fields``, read from
  TransferQueue) is counted by the slime path's failure guard; when it trips, the step's τ metrics are logged and
  ``FailureGuardError`` stops the run with one line naming the endpoint (V1 settles a failed agent loop without
  stopping, so the guard cannot live in the loop there; and a step whose every episode failed would otherwise
  reach verl's rollout correction, which raises on a batch without a trainable token);
- after verl's step metrics (``_compute_metrics``), τ's numbers join them (``episodes.step_metrics``:
  ``tau/<benchmark>/<domain>/...``, ``tau/failed/<endpoint>``);
- validation adds τ's ``pass^k`` per data source (``val-core/<source>/tau/pass^k``) to verl's ``best@k`` (pass@k).

Registered on import: ``VERL_USE_EXTERNAL_MODULES=slime_tau_plugin.adapters.verl.register`` imports it in verl's
processes (``scripts/run_verl_qwen3_4B_tau2.sh`` sets it and pins ``trainer.v1.trainer_mode=tau_sync``).
"""

from __future__ import annotations

import logging
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1 import PPOTrainerColocateAsync, PPOTrainerSeparateAsync, PPOTrainerSync, register_trainer

from slime_tau_plugin.adapters.verl.agent_loop import trainer_tau_config
from slime_tau_plugin.adapters.verl.episodes import (
    episode_view,
    observe_step,
    step_metrics,
    validation_pass_k,
    verl_guard_settings,
)
from slime_tau_plugin.engine.metrics.failure_guard import FailureGuard, FailureGuardError

logger = logging.getLogger(__name__)

TRAINER_MODES = ("tau_sync", "tau_colocate_async", "tau_separate_async")


class TauTrainerMixin:
    """τ's step metrics, failure guard and validation pass^k on top of a verl V1 ``PPOTrainer``."""

    config: Any
    logger: Any
    _tau_guard: FailureGuard | None = None

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        """Count the step's groups first: a step whose every episode failed would reach verl's rollout
        correction with no trainable token (a ``ValueError`` there), so the guard speaks before it."""
        views = self._tau_views(batch)
        try:
            observe_step(self._guard(), [key for key, _ in views], [view for _, view in views])
        except FailureGuardError as exc:
            logger.error("%s", exc)
            found = [view for _, view in views if view is not None]
            self.logger.log(data=step_metrics(found), step=getattr(self, "global_steps", 0))  # the stopping step
            raise
        return super()._compute_advantage(batch, metrics)  # type: ignore[misc]

    def _compute_metrics(self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int) -> None:
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)  # type: ignore[misc]
        metrics.update(step_metrics([view for _, view in self._tau_views(batch) if view is not None]))

    def _tau_views(self, batch: Any) -> list[tuple[str, Any]]:
        """(prompt uid, view) of the batch's real rows (padding skipped), read from TransferQueue."""
        keys = [key for key, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding", False)]
        if not keys:
            return []
        data = tq.kv_batch_get(
            keys=keys, partition_id=batch.partition_id, select_fields=["extra_fields", "response_mask"]
        )
        extras = data.pop("extra_fields").tolist()  # as verl reads it (trainer_base._compute_metrics)
        masks = [m.tolist() for m in data["response_mask"].unbind(0)]
        uids = [key.rsplit("_", 2)[0] for key in keys]  # V1's keys: {uid}_{session}_{output}
        return [(u, episode_view(e, m)) for u, e, m in zip(uids, extras, masks, strict=True)]

    def _guard(self) -> FailureGuard:
        if self._tau_guard is None:
            groups_per_step = self.config.data.get("train_batch_size")
            settings = verl_guard_settings(trainer_tau_config(self.config), groups_per_step)
            self._tau_guard = FailureGuard(settings)
        return self._tau_guard

    def _val_metrics_update(
        self,
        data_sources: Any,
        sample_uids: Any,
        reward_extra_infos_dict: dict,
        sample_turns: Any,
        *args: Any,
        **kw: Any,
    ) -> dict[str, float]:
        out = super()._val_metrics_update(  # type: ignore[misc]
            data_sources, sample_uids, reward_extra_infos_dict, sample_turns, *args, **kw
        )
        successes = reward_extra_infos_dict.get("acc")
        if successes is not None and len(successes) == len(data_sources):
            failed, customer = reward_extra_infos_dict.get("failed"), reward_extra_infos_dict.get("customer_error")
            out |= validation_pass_k(list(data_sources), list(sample_uids), list(successes), failed, customer)
        return out


@register_trainer("tau_sync")
class TauPPOTrainerSync(TauTrainerMixin, PPOTrainerSync):
    """verl's ``sync`` trainer with τ's metrics and failure guard."""


@register_trainer("tau_colocate_async")
class TauPPOTrainerColocateAsync(TauTrainerMixin, PPOTrainerColocateAsync):
    """verl's ``colocate_async`` trainer with τ's metrics and failure guard."""


@register_trainer("tau_separate_async")
class TauPPOTrainerSeparateAsync(TauTrainerMixin, PPOTrainerSeparateAsync):
    """verl's ``separate_async`` trainer with τ's metrics and failure guard."""
