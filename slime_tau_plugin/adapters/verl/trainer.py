"""verl V1 trainer modes ``tau_sync``, ``tau_colocate_async``, ``tau_separate_async``: verl's own trainers plus τ.

verl 0.9's default trainer (``trainer.use_v1: true``) is chosen by ``trainer.v1.trainer_mode`` from its registry
(``verl.trainer.ppo.v1.register_trainer``). Each mode here is verl's trainer of the same name with two additions,
both in the trainer process, where a whole step's rows are together:

- after verl's step metrics (``_compute_metrics``), the step's ``extra_fields`` are read from TransferQueue and
  τ's numbers join verl's (``episodes.step_metrics``: ``tau/<benchmark>/<domain>/...``, ``tau/failed/<endpoint>``),
  and each prompt group is counted by the slime path's failure guard; when it trips, the step's metrics are
  logged and ``FailureGuardError`` stops the run with one line naming the endpoint (V1 settles a failed agent
  loop without stopping, so the guard cannot live in the loop there);
- validation adds τ's ``pass^k`` per data source (``val-core/<source>/tau/pass^k``) to verl's ``best@k`` (pass@k).

Registered on import: ``VERL_USE_EXTERNAL_MODULES=slime_tau_plugin.adapters.verl.register`` imports it in verl's
processes (``scripts/run_verl_qwen3_4B_tau2.sh`` sets it and pins ``trainer.v1.trainer_mode=tau_sync``).
"""

from __future__ import annotations

import logging
from typing import Any

import transfer_queue as tq
from verl.trainer.ppo.v1 import PPOTrainerColocateAsync, PPOTrainerSeparateAsync, PPOTrainerSync, register_trainer

from slime_tau_plugin.adapters.slime.group_filter import FailureGuard
from slime_tau_plugin.adapters.verl.agent_loop import trainer_tau_config
from slime_tau_plugin.adapters.verl.episodes import (
    episode_view,
    observe_step,
    step_metrics,
    validation_pass_k,
    verl_guard_settings,
)
from slime_tau_plugin.engine.errors import FailureGuardError

logger = logging.getLogger(__name__)

TRAINER_MODES = ("tau_sync", "tau_colocate_async", "tau_separate_async")


class TauTrainerMixin:
    """τ's step metrics, failure guard and validation pass^k on top of a verl V1 ``PPOTrainer``."""

    config: Any
    logger: Any
    _tau_guard: FailureGuard | None = None

    def _compute_metrics(self, batch: Any, metrics: dict, timing_raw: dict, global_steps: int, epoch: int) -> None:
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)  # type: ignore[misc]
        rows = [i for i, tag in enumerate(batch.tags) if not tag.get("is_padding", False)]
        keys = [batch.keys[i] for i in rows]
        if not keys:
            return
        fields = ["extra_fields", "response_mask"]
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
        extras = data["extra_fields"].tolist()
        masks = [m.tolist() for m in data["response_mask"].unbind(0)]
        views = [episode_view(e, m) for e, m in zip(extras, masks, strict=True)]
        metrics.update(step_metrics([v for v in views if v is not None]))
        try:
            observe_step(self._guard(), [key.rsplit("_", 2)[0] for key in keys], views)
        except FailureGuardError as exc:
            logger.error("%s", exc)
            self.logger.log(data=metrics, step=global_steps)  # the stopping step's numbers still reach the log
            raise

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
            out |= validation_pass_k(list(data_sources), list(sample_uids), list(successes))
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
