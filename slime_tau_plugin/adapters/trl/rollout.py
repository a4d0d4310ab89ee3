"""TRL entry point: :class:`TauRollout`, a ``GRPOTrainer`` ``rollout_func`` that plays τ episodes.

TRL (1.16, ``rollout_func(prompts, trainer) -> dict``) hands the rows of one generation batch, each prompt
already repeated ``num_generations`` times in a row (its ``RepeatSampler``); it wants one completion per row:
``prompt_ids``, ``completion_ids`` and ``logprobs``, an optional ``env_mask`` (1 on model tokens, 0 on
environment tokens), and forwards every other field to the reward functions. Each row is one episode, played by
the engine's ``play_request`` (or a worker pool's, with ``tau_episode_workers``), the same call slime's
``generate`` makes: ``prompt_ids`` are the episode's prompt, ``completion_ids`` its response (model turns, tool and
user text), ``env_mask`` our loss mask, ``logprobs`` the server's (0.0 where the mask is 0). The copies of a
prompt differ by their sampling seed (``GRPOConfig.seed``, the step, the task and the copy's place).

Outcomes: an episode that must not train (an env, user-simulator or policy failure, an abort, a cut-off) has
``env_mask`` all 0 and ``tau_score`` None; :func:`reward.tau_reward` returns that None, which TRL reads as
"unscorable": the row is left out of its group's mean and std and its advantage is 0, so it adds no gradient
and does not move its group's baseline (TRL has no way to drop a row from a batch). Fields ``tau_status``,
``tau_termination``, ``tau_task`` and ``tau_error`` say why. A wrong setting raises ``ConfigError``.

TRL calls ``rollout_func`` synchronously; the episodes run concurrently on one event loop in a daemon thread
that lives as long as the rollout function, so HTTP sessions built on it stay valid between steps.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import uuid
from collections.abc import Coroutine
from typing import Any

from slime_tau_plugin.adapters.trl.config import check_settings, check_trl_version, sampling_params, trl_tau_config
from slime_tau_plugin.adapters.trl.rows import task_request
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.outcome import training_reward
from slime_tau_plugin.engine.workers.messages import EpisodeRequest, FinishedEpisode
from slime_tau_plugin.engine.workers.play import play_request
from slime_tau_plugin.engine.workers.registry import pool_for

REQUIRED = ("prompt_ids", "completion_ids", "logprobs")
FIELDS = ("env_mask", "tau_score", "tau_status", "tau_termination", "tau_task", "tau_error", "tau_num_turns")
"""What :class:`TauRollout` returns besides TRL's required keys (each a list, one entry per row)."""


class _LoopThread:
    """One asyncio loop in a daemon thread: TRL's synchronous call submits coroutines and waits for them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tau-trl-rollout", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


def episode_seed(base: int, step: int, prompt: str, copy: int) -> int:
    """The sampling seed of one row: the same run seed, step, task and copy always sample the same episode."""
    digest = hashlib.sha256(f"{base}/{step}/{prompt}/{copy}".encode()).digest()
    return int.from_bytes(digest[:6], "big")  # < 2**48: exact in JSON, within SGLang's int64


class TauRollout:
    """``GRPOTrainer(rollout_func=TauRollout(tau_user="scripted", ...))``: τ episodes as TRL completions.

    Keyword arguments are ``tau_*`` settings (the keys of slime's YAML); the trainer's ``GRPOConfig`` adds its
    limits and, unless ``tau_policy_url`` is set, its vLLM server (``config.py``).
    """

    def __init__(self, **settings: Any) -> None:
        """Raises: ConfigError: TRL is not version :data:`config.TRL_VERSION`, or a key is wrong."""
        check_trl_version()
        self.settings = dict(settings)
        check_settings(self.settings)
        self._loop: _LoopThread | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per row of ``prompts`` (TRL's generation batch) and return TRL's fields.

        Raises:
            ConfigError: a setting is wrong, a prompt names no task, or the rows are not whole groups.
        """
        evaluation = not trainer.model.training
        groups = trainer.num_generations_eval if evaluation else trainer.num_generations
        _check_groups(prompts, groups)
        name = getattr(trainer.processing_class, "name_or_path", None)
        config = trl_tau_config(trainer.args, self.settings, str(name) if name else None)
        requests = episode_requests(prompts, config, trainer.args, int(trainer.state.global_step), groups, evaluation)
        if self._loop is None:
            self._loop = _LoopThread()
        finished = self._loop.run(play_all(config, requests))
        return trl_output(finished, config, evaluation=evaluation)


def episode_requests(
    prompts: list[Any], config: TauConfig, args: Any, step: int, groups: int, evaluation: bool
) -> list[EpisodeRequest]:
    """One request per row: its own seed, and in training its GRPO group (the ``groups`` copies of a prompt, named
    afresh each call), whose customer opening is shared with ``tau_user_shared_opening``.

    Raises:
        ConfigError: a prompt names no task.
    """
    batch = uuid.uuid4().hex
    requests = []
    for i, prompt in enumerate(prompts):
        task_prompt, metadata = task_request(prompt, config)
        params = sampling_params(args, episode_seed(int(args.seed), step, str(prompt), i % groups))
        group = None if evaluation else f"trl:{batch}:{i // groups}"
        requests.append(EpisodeRequest(uuid.uuid4().hex, task_prompt, metadata, params, group=group))
    return requests


def _check_groups(prompts: list[Any], groups: int) -> None:
    if not prompts or len(prompts) % groups:
        raise ConfigError(f"TRL passed {len(prompts)} rows, not whole groups of num_generations={groups}")
    for start in range(0, len(prompts), groups):
        if any(p != prompts[start] for p in prompts[start : start + groups]):
            raise ConfigError(
                f"rows {start}..{start + groups - 1} are not one prompt repeated num_generations={groups} times "
                "(TRL's RepeatSampler order); the rollout cannot form GRPO groups"
            )


async def play_all(config: TauConfig, requests: list[EpisodeRequest]) -> list[FinishedEpisode]:
    """Play every request concurrently, as slime's ``generate`` plays one (``play_request``, or the pool's)."""
    pool = await pool_for(config)
    if pool is None:
        return list(await asyncio.gather(*(play_request(config, r, None) for r in requests)))
    return list(await asyncio.gather(*(pool.run(r, None) for r in requests)))


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
