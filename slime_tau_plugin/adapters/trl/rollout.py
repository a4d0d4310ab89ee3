"""TRL entry point: :class:`TauRollout`, a ``GRPOTrainer`` ``rollout_func`` that plays τ episodes.

TRL (1.16, ``rollout_func(prompts, trainer) -> dict``) hands each process its rows of the global generation batch
(its ``RepeatSampler`` repeats each prompt ``num_generations`` times in a row; accelerate's ``BatchSamplerShard``
slices the batch per process, so one group may span processes: ``groups.py``). It wants one completion per row:
``prompt_ids``, ``completion_ids`` and ``logprobs``, an optional ``env_mask`` (1 on model tokens, 0 on environment
tokens), and forwards every other field to the reward functions. Each row is one episode, an ``EpisodeRequest`` played
through the engine's failure boundary ``play_episode`` (or a worker pool's, with ``tau_episode_workers``), the same
call slime's ``generate`` makes:
``prompt_ids`` are the episode's prompt, ``completion_ids`` its response (model turns, tool and user text),
``env_mask`` our loss mask, ``logprobs`` the server's (0.0 where the mask is 0). A row's seed and GRPO group come
from its global place (``groups.py``), so every process agrees on them.

Outcomes: an episode that must not train (an env, user-simulator or policy failure, an abort, a cut-off) has
``env_mask`` all 0 and ``tau_score`` None; :func:`reward.tau_reward` returns that None, which TRL reads as
"unscorable": the row is left out of its group's mean and std and its advantage is 0, so it adds no gradient
and does not move its group's baseline (TRL has no way to drop a row from a batch). Fields ``tau_status``,
``tau_termination``, ``tau_task`` and ``tau_error`` say why. A wrong setting raises ``ConfigError``.

After playing, the processes gather their rows' views (``episodes.py``): τ's step metrics (``tau_step_metrics``,
which ``tau_reward`` logs through TRL's ``log_metric``) and, in training, the failure guard, whose stop the
trainer's callback carries out (``callback.py``). TRL calls ``rollout_func`` synchronously; the episodes run
concurrently on one event loop in a daemon thread that lives as long as the rollout function, so HTTP sessions
built on it stay valid between steps.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from slime_tau_plugin.adapters.trl.callback import StopSignal, guard_stop_class
from slime_tau_plugin.adapters.trl.config import check_settings, check_trl_version, sampling_params, trl_tau_config
from slime_tau_plugin.adapters.trl.episodes import (
    EpisodeView,
    episode_view,
    guard_settings,
    observe_batch,
    step_metrics,
)
from slime_tau_plugin.adapters.trl.groups import RowPlace, episode_seed, group_key, process_of, row_places
from slime_tau_plugin.adapters.trl.rows import task_request
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.request import EpisodeOptions, EpisodeRequest
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.engine.outcome import training_reward
from slime_tau_plugin.engine.workers.messages import FinishedEpisode
from slime_tau_plugin.engine.workers.play import finish_episode
from slime_tau_plugin.engine.workers.registry import pool_for
from slime_tau_plugin.reporting.failure_guard import FailureGuard, FailureGuardError

REQUIRED = ("prompt_ids", "completion_ids", "logprobs")
FIELDS = ("env_mask", "tau_score", "tau_status", "tau_termination", "tau_task", "tau_error", "tau_num_turns")
"""What :class:`TauRollout` returns besides TRL's required keys (each a list, one entry per row); and
``tau_step_metrics``, one dict for the whole batch (TRL hands a field that is not a list to every row as it is)."""
METRICS_FIELD = "tau_step_metrics"

logger = logging.getLogger(__name__)


class _LoopThread:
    """One asyncio loop in a daemon thread: TRL's synchronous call submits coroutines and waits for them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tau-trl-rollout", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class TauRollout:
    """``GRPOTrainer(rollout_func=TauRollout(tau_user="scripted", ...))``: τ episodes as TRL completions.

    Keyword arguments are ``tau_*`` settings (the keys of slime's YAML); the trainer's ``GRPOConfig`` adds its
    limits and, unless ``tau_policy_url`` is set, its vLLM server, which TRL keeps in sync (``config.py``).
    ``off_policy=True`` accepts a ``tau_policy_url`` server TRL does not sync: its episodes are off-policy.
    One instance per process: it holds the process's failure guard and its callback (:attr:`callback`).
    """

    def __init__(self, *, off_policy: bool = False, **settings: Any) -> None:
        """Raises: ConfigError: TRL is outside :data:`config.TRL_RANGE`, or a key is wrong."""
        check_trl_version()
        self.settings = dict(settings)
        self.off_policy = bool(off_policy)
        check_settings(self.settings)
        self.signal = StopSignal()
        self.callback = guard_stop_class()(self.signal)
        """The ``TrainerCallback`` that stops training when the failure guard trips (added on the first call)."""
        self.gather: Callable[[list[Any]], list[Any]] = _gather_object
        """The processes' all-gather of picklable rows, in process order: accelerate's ``gather_object`` (what TRL
        gathers with); the multi-process test stands threads' exchange in for it."""
        self._guard: FailureGuard | None = None
        self._generations = 0
        self._loop: _LoopThread | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per row of ``prompts`` (this process's share of TRL's generation batch).

        Raises:
            ConfigError: a setting is wrong, a prompt names no task, or the rows are not TRL's group order.
        """
        evaluation = not trainer.model.training
        groups = trainer.num_generations_eval if evaluation else trainer.num_generations
        process, processes = process_of(trainer)
        places = row_places(prompts, process, processes, groups)
        name = getattr(trainer.processing_class, "name_or_path", None)
        config = trl_tau_config(trainer.args, self.settings, str(name) if name else None, off_policy=self.off_policy)
        step = int(trainer.state.global_step)
        generation = None if evaluation else f"{trainer.args.seed}/{step}/{self._generations}"
        requests = episode_requests(prompts, places, config, trainer.args, step, generation)
        if self._loop is None:
            self._loop = _LoopThread()
        finished = self._loop.run(play_all(config, requests))
        views = [episode_view(done, place.group) for done, place in zip(finished, places, strict=True)]
        if processes > 1:
            views = list(self.gather(views))  # every process: the same global rows
        if not evaluation:
            self._generations += 1
            self._attach(trainer)
            self._observe(config, views, len(prompts) * processes // groups)
        out: dict[str, Any] = trl_output(finished, config, evaluation=evaluation)
        out[METRICS_FIELD] = step_metrics(views)
        return out

    def _attach(self, trainer: Any) -> None:
        handler = getattr(trainer, "callback_handler", None)
        if handler is not None and self.callback not in handler.callbacks:
            trainer.add_callback(self.callback)

    def _observe(self, config: TauConfig, views: Sequence[EpisodeView], groups_per_batch: int) -> None:
        settings = guard_settings(config, groups_per_batch)
        if self._guard is None or self._guard.settings != settings:
            self._guard = FailureGuard(settings)
        try:
            observe_batch(self._guard, views)
        except FailureGuardError as exc:
            if self.signal.error is None:
                logger.error("%s", exc)
            self.signal.set(exc)


def _gather_object(values: list[Any]) -> list[Any]:
    from accelerate.utils import gather_object

    return list(gather_object(values))


def episode_requests(
    prompts: Sequence[Any],
    places: Sequence[RowPlace],
    config: TauConfig,
    args: Any,
    step: int,
    generation: str | None,
) -> list[EpisodeRequest]:
    """One request per row: its seed from its global row and, in training (``generation`` set), its GRPO group
    (the same key on every process holding part of the group), whose customer opening is shared with
    ``tau_user_shared_opening``.

    Raises:
        ConfigError: a prompt names no task.
    """
    requests = []
    for prompt, place in zip(prompts, places, strict=True):
        task_prompt, metadata = task_request(prompt, config)
        params = sampling_params(args, episode_seed(int(args.seed), step, str(prompt), place.row))
        group = None if generation is None else group_key(generation, place, str(prompt))
        requests.append(EpisodeRequest(uuid.uuid4().hex, task_prompt, metadata, params, EpisodeOptions(group=group)))
    return requests


async def play_all(config: TauConfig, requests: list[EpisodeRequest]) -> list[FinishedEpisode]:
    """Play every request concurrently, as slime's ``generate`` plays one (the failure boundary, or the pool's)."""
    pool = await pool_for(config)
    if pool is None:
        played = await asyncio.gather(*(play_episode(config, r) for r in requests))
        return list(await asyncio.gather(*(finish_episode(p) for p in played)))
    return list(await asyncio.gather(*(pool.run(r) for r in requests)))


def trl_output(finished: list[FinishedEpisode], config: TauConfig, *, evaluation: bool) -> dict[str, list[Any]]:
    """TRL's ``rollout_func`` dict for played episodes, one entry per row, in order."""
    out: dict[str, list[Any]] = {key: [] for key in (*REQUIRED, *FIELDS)}
    for episode in finished:
        result, traj = episode.result, episode.trajectory
        trains = result.termination.is_trainable
        out["prompt_ids"].append(list(traj.prompt_ids))
        out["completion_ids"].append(list(traj.response_ids))
        out["logprobs"].append(list(traj.rollout_log_probs))
        out["env_mask"].append(list(traj.loss_mask))
        out["tau_score"].append(training_reward(result, config, evaluation=evaluation) if trains else None)
        out["tau_status"].append(result.termination.status.value)
        out["tau_termination"].append(result.termination.value)
        task = result.task
        out["tau_task"].append(f"{task.benchmark}/{task.domain}/{task.split}/{task.task_id}")
        out["tau_error"].append(result.error)
        out["tau_num_turns"].append(result.num_turns)
    return out
