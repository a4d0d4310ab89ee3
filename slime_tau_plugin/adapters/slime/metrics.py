"""slime's log hooks for τ episodes: per-domain reward, pass^k, turns, errors, ends, time and tokens.

Two front doors, each a slime flag::

    --custom-rollout-log-function-path      slime_tau_plugin.adapters.slime.metrics.log_rollout
    --custom-eval-rollout-log-function-path slime_tau_plugin.adapters.slime.metrics.log_eval

Both return False, so slime still logs its own metrics. Keys follow slime's naming, because slime's wandb
setup binds ``rollout/*`` to the step metric ``rollout/step`` and ``eval/*`` to ``eval/step``:
``rollout/tau/<benchmark>/<domain>/<metric>`` and ``eval/tau/<dataset>/<benchmark>/<domain>/<metric>``.
The numbers come from :func:`episode_metrics`, a pure function of the samples. Only samples our
``generate`` filled (``metadata["termination_reason"]`` present) are counted; any other sample is skipped.
slime is imported inside the hooks only (it moved ``logging_utils`` from ``slime.utils`` to
``slime.observability`` in 2026-08; both are tried); without slime the metrics go to this module's logger.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from slime_tau_plugin.adapters.slime.partial import abort_tally, resume_metrics
from slime_tau_plugin.adapters.slime.redraw import redraw_budget
from slime_tau_plugin.adapters.slime.task_record import heldout_metrics
from slime_tau_plugin.adapters.slime.weight_lag import lag_metrics
from slime_tau_plugin.engine.config.tau_config import coerce_field
from slime_tau_plugin.engine.net.user_budget import user_token_ledger
from slime_tau_plugin.engine.shared import shared_state
from slime_tau_plugin.reporting.reward_breakdown import reward_breakdown_metrics
from slime_tau_plugin.reporting.summary import domain_summary, pass_k_summary
from slime_tau_plugin.reporting.user_share import user_share_metrics

logger = logging.getLogger(__name__)

ROLLOUT_PREFIX = "rollout/tau/"
EVAL_PREFIX = "eval/tau/"


def episode_metrics(
    samples: Iterable[Any], prefix: str, *, with_pass_k: bool = False, default_domain: str = "tau2/retail"
) -> dict[str, float]:
    """Per-domain metrics of the samples our ``generate`` filled, keyed ``<prefix><benchmark>/<domain>/<name>``.

    ``with_pass_k`` adds ``pass^1..pass^n`` and ``left_out`` by the one rule of ``reporting/summary.py``
    (FAILED and deadline episodes are no evidence: left out of pass^k and counted; n = trials per task found in the
    data, the smallest if tasks differ; tasks are told apart by ``task_id``/``task_index``, else the prompt).
    ``default_domain`` names samples whose metadata carries no benchmark/domain (a row that relied on the
    ``tau_*`` defaults).
    """
    groups: dict[str, list[Any]] = defaultdict(list)
    skipped = 0
    for sample in samples:
        if _is_ours(sample):
            groups[_domain_of(sample.metadata, default_domain)].append(sample)
        else:
            skipped += 1
    if skipped:
        logger.debug("tau metrics: skipped %d samples without our metadata", skipped)
    out: dict[str, float] = {}
    for domain, group in sorted(groups.items()):
        stats = domain_summary(group)
        if with_pass_k:
            stats |= pass_k_summary(group, f"{prefix}{domain}")
        out |= {f"{prefix}{domain}/{name}": value for name, value in stats.items()}
    ours = [sample for group in groups.values() for sample in group]
    return out | reward_breakdown_metrics(ours, prefix, default_domain)


def log_rollout(
    rollout_id: int, args: Any, samples: Sequence[Any], rollout_extra_metrics: Any, rollout_time: float
) -> bool:
    """slime's ``--custom-rollout-log-function-path`` hook; returns False so slime's own logging runs too.

    Adds ``rollout/tau/partial/*``: episodes slime aborted since the last step (thrown away or suspended,
    ``partial.AbortTally``) and, over the step's samples, the share resumed, turns reused, off-policy ids; and
    ``rollout/tau/user_tokens/{step,total,refused}``: the LLM user's tokens this step and this run, and the requests
    its budget refused (``net/user_budget.py``); ``rollout/tau/tau_user/{cache,shared_opening}_*``: the LLM user's
    requests answered from its cache and openings shared in a GRPO group (``reporting/user_share.py``); and
    ``rollout/tau/lag/*``: the trainable ids by weight lag against the weights that train this step, and the share
    older than ``tau_max_weight_lag``, which the reward post-process masks (``weight_lag.mask_for_training``); and
    ``rollout/tau/redraw/*``: over-sampling batches the dynamic filter made slime draw again this step and groups
    kept short of spread at ``tau_max_redraws`` (``redraw.py``). This hook ends the budget's and the redraw step.

    Raises:
        ConfigError: ``tau_max_weight_lag`` is not a whole number >= 0.
    """
    max_lag = coerce_field("max_weight_lag", getattr(args, "tau_max_weight_lag", None))
    flat = _flatten(samples)
    metrics = episode_metrics(flat, ROLLOUT_PREFIX, default_domain=_default_domain(args))
    ours = [s.metadata for s in flat if _is_ours(s)]
    lags = lag_metrics([s for s in flat if _is_ours(s)], rollout_id, max_lag)  # masked in advantages.py, next
    _check_mask_hook(args, max_lag)
    redraw = redraw_budget().take()
    if redraw is not None:
        metrics |= {f"{ROLLOUT_PREFIX}{name}": value for name, value in redraw.metrics().items()}
    tally = abort_tally().take()
    spent = user_token_ledger().end_step()  # the step ends here: its user-token budget starts again
    if any(spent.values()):
        metrics |= {f"{ROLLOUT_PREFIX}{name}": value for name, value in spent.items()}
    if ours or any(tally.values()):
        partial = tally | resume_metrics(ours) | worker_metrics(ours) | user_share_metrics(ours)
        metrics |= {f"{ROLLOUT_PREFIX}{name}": value for name, value in partial.items()}
    metrics |= {f"{ROLLOUT_PREFIX}{name}": value for name, value in lags.items()}
    emit(args, rollout_id, metrics, "rollout/step")
    return False


REWARD_HOOK = "slime_tau_plugin.adapters.slime.advantages.post_process_rewards"
"""Where ``tau_max_weight_lag`` is enforced (slime's ``--custom-reward-post-process-path``)."""


def _check_mask_hook(args: Any, max_lag: int | None) -> None:
    """Say once when ``tau_max_weight_lag`` is set but slime will not run the hook that enforces it."""
    if max_lag is None or not hasattr(args, "custom_reward_post_process_path"):
        return  # a minimal args (not slime's parser): nothing to tell
    hook = args.custom_reward_post_process_path
    bypass = getattr(args, "custom_convert_samples_to_train_data_path", None)
    if (hook != REWARD_HOOK or bypass) and shared_state().first_time("weight_lag", "hook"):
        logger.warning(
            "tau_max_weight_lag=%d is enforced by --custom-reward-post-process-path %s, but slime runs %s%s: "
            "stale turns train unmasked",
            max_lag,
            REWARD_HOOK,
            hook or "its own",
            f" inside --custom-convert-samples-to-train-data-path {bypass}" if bypass else "",
        )


def worker_metrics(metas: Sequence[dict[str, Any]]) -> dict[str, float]:
    """With ``tau_episode_workers``: how many workers played the step, and the share of episodes played again
    because their worker died (none without workers)."""
    workers = {m["tau_worker"].split(" pid ")[0] for m in metas if m.get("tau_worker")}
    if not workers:
        return {}
    replayed = sum(1 for m in metas if m.get("tau_worker_lost"))
    return {"workers/count": float(len(workers)), "workers/replayed": replayed / len(metas)}


class EvalClock:
    """When this process's current evaluation started: the first ``generate(..., evaluation=True)`` after the last
    eval log (slime runs one eval at a time and logs it when every dataset is done)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start: float | None = None

    def started(self) -> None:
        with self._lock:
            if self._start is None:
                self._start = time.monotonic()

    def take(self) -> float | None:
        """Seconds since the eval started (None: no evaluation episode ran here), and start the next one."""
        with self._lock:
            start, self._start = self._start, None
        return None if start is None else time.monotonic() - start


def eval_clock() -> EvalClock:
    return shared_state().part(EvalClock)


def log_eval(rollout_id: int, args: Any, data: dict[str, dict[str, Any]], extra_metrics: Any) -> bool:
    """slime's ``--custom-eval-rollout-log-function-path`` hook (``data = {dataset: {"samples": [...], ...}}``).

    Per dataset and domain, pass^k over the episodes that are evidence and ``left_out`` beside it, and the
    held-out check beside ``pass^1`` (``train_pass_rate``, ``train_minus_eval``: ``task_record.heldout_metrics``);
    and ``eval/tau/wall_s``, the eval's wall time (from its first episode to this log).
    """
    metrics: dict[str, float] = {}
    for name, result in data.items():
        samples = _flatten(result.get("samples") or [])
        metrics |= episode_metrics(
            samples, f"{EVAL_PREFIX}{name}/", with_pass_k=True, default_domain=_default_domain(args)
        )
    metrics |= heldout_metrics(args, rollout_id, metrics, EVAL_PREFIX)
    metas = [s.metadata for r in data.values() for s in _flatten(r.get("samples") or []) if _is_ours(s)]
    metrics |= {f"{EVAL_PREFIX}{name}": value for name, value in user_share_metrics(metas).items()}
    wall = eval_clock().take()
    if metrics and wall is not None:
        metrics[f"{EVAL_PREFIX}wall_s"] = wall
    emit(args, rollout_id, metrics, "eval/step")
    return False


def rollout_step(args: Any, rollout_id: int) -> int:
    """The x-axis value slime logs with (its ``compute_rollout_step``): the train step or the rollout id."""
    if getattr(args, "wandb_always_use_train_step", False):
        return rollout_id * args.rollout_batch_size * args.n_samples_per_prompt // args.global_batch_size
    return rollout_id


def emit(args: Any, rollout_id: int, metrics: dict[str, float], step_key: str) -> None:
    """Log ``metrics`` at ``step_key`` through slime's logger (and ours); the one way our hooks log."""
    if not metrics:
        return
    metrics[step_key] = rollout_step(args, rollout_id)
    logger.info("tau metrics %s %s: %s", step_key.split("/")[0], rollout_id, metrics)
    log = _slime_log()
    if log is not None:
        log(args, metrics, step_key=step_key)


def _slime_log() -> Any:
    """slime's ``logging_utils.log`` (current or pre-2026-08 location), or None outside slime."""
    for module in ("slime.observability.logging_utils", "slime.utils.logging_utils"):
        try:
            return importlib.import_module(module).log
        except ImportError:
            continue
    return None


def _is_ours(sample: Any) -> bool:
    meta = getattr(sample, "metadata", None)
    reward = getattr(sample, "reward", None)
    return (
        isinstance(meta, dict)
        and "termination_reason" in meta
        and isinstance(reward, (int, float))
        and not isinstance(reward, bool)
    )


def _domain_of(meta: dict[str, Any], default: str) -> str:
    if meta.get("benchmark") and meta.get("domain"):
        return f"{meta['benchmark']}/{meta['domain']}"
    return default


def _flatten(samples: Any) -> list[Any]:
    """slime may hand over ``list[list[Sample]]`` (groups); metrics want the samples."""
    flat: list[Any] = []
    for item in samples:
        flat.extend(_flatten(item) if isinstance(item, list) else [item])
    return flat


def _default_domain(args: Any) -> str:
    return f"{getattr(args, 'tau_benchmark', None) or 'tau2'}/{getattr(args, 'tau_domain', None) or 'retail'}"
