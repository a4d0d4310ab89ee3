"""What ``scripts/run_verl_qwen3_4B_tau2.sh`` checks before it starts anything (``check_launch``).

Runs in the launching shell's Python; imports verl inside its functions only, like the rest of the package outside
``agent_loop.py``. It stands above the loop, the trainer modes and the registration it checks (nothing imports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slime_tau_plugin.adapters.verl.recipes import refuse_recipes
from slime_tau_plugin.adapters.verl.rows import AGENT_NAME, EVAL_MARK, check_row_sets, is_evaluation
from slime_tau_plugin.engine.chat.tool_calls import check_parser_names
from slime_tau_plugin.engine.errors import ConfigError


def check_launch(overrides: Sequence[str], *, train_sets: str = "", eval_sets: str = "") -> str:
    """What ``scripts/run_verl_*.sh`` checks before it starts anything; returns a one-line summary.

    verl's ``ppo_trainer`` config composes with ``overrides`` (Hydra refuses an unknown key) and passes
    ``main_ppo``'s own ``validate_config``; the agent-loop YAML has the ``tau_agent`` entry, whose settings
    (with the ``tau`` section and verl's limits) build a ``TauConfig`` with known parsers; the data files
    that exist hold ``tau_agent`` rows of ``train_sets``/``eval_sets`` (the script's ``TRAIN_SETS``/``EVAL_SETS``,
    when given); the trainer is one that keeps τ's promises: ``algorithm.adv_estimator=tau_<name>`` (verl's estimator
    without the failed episodes) and, under V1, verl's own trainer mode with τ's sampler (guard and metrics).

    Raises:
        ConfigError: the first problem, in one line.
    """
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    from slime_tau_plugin.adapters.verl import register  # noqa: F401  (the tau_<name> estimators, the loop)
    from slime_tau_plugin.adapters.verl.agent_loop import TauAgentLoop, trainer_tau_config

    try:
        with initialize_config_dir(
            config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None
        ):
            cfg = compose(config_name="ppo_trainer", overrides=list(overrides))
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    except Exception as exc:
        raise ConfigError(f"verl rejects the command line: {type(exc).__name__}: {exc}".replace("\n", " ")) from exc
    check_trainer(cfg)
    path = cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path
    if not path or not Path(path).is_file():
        raise ConfigError(f"actor_rollout_ref.rollout.agent.agent_loop_config_path={path!r} is not a file")
    entries = [e for e in OmegaConf.load(path) if e.get("name") == AGENT_NAME]
    target = f"{TauAgentLoop.__module__}.{TauAgentLoop.__qualname__}"
    if len(entries) != 1 or entries[0].get("_target_") != target:
        raise ConfigError(f"{path}: expected one entry {{name: {AGENT_NAME}, _target_: {target}}}")
    other = sorted(k for k in entries[0] if k not in ("name", "_target_") and not str(k).startswith("tau_"))
    if other:
        raise ConfigError(f"{path}: keys {other} are not tau_* settings")
    tau = trainer_tau_config(cfg)
    check_parser_names(tau.tool_call_parser, tau.reasoning_parser)
    for key in ("train_files", "val_files"):
        for file in _listed(cfg.data.get(key)):
            if Path(file).is_file():
                _check_rows(key, file)
                specs, what = (train_sets, "TRAIN_SETS") if key == "train_files" else (eval_sets, "EVAL_SETS")
                if specs:
                    check_row_sets(file, specs, what)
    return (
        f"verl config OK: prompt_length={cfg.actor_rollout_ref.rollout.prompt_length} "
        f"response_length={tau.max_response_len} max_context_len={tau.max_context_len} max_turns={tau.max_turns} "
        f"max_tokens_per_turn={tau.max_tokens_per_turn} user={tau.user} parser={tau.tool_call_parser} "
        f"trainer={_trainer_name(cfg)} adv_estimator={cfg.algorithm.adv_estimator}"
    )


def _trainer_name(cfg: Any) -> str:
    if not cfg.trainer.get("use_v1"):
        return "batch"
    return f"v1/{cfg.trainer.v1.trainer_mode}+{cfg.trainer.v1.sampler.custom_sampler.get('name')}"


def check_trainer(cfg: Any) -> None:
    """The estimator and trainer that keep failed episodes out of training signal and stop a run on a dead endpoint."""
    refuse_recipes(cfg)
    from slime_tau_plugin.adapters.verl.advantage import PREFIX, wrap_estimator

    estimator = str(cfg.algorithm.adv_estimator)
    if not estimator.startswith(PREFIX):
        raise ConfigError(
            f"algorithm.adv_estimator={estimator} lets a failed episode's 0 reward into its group's statistics; use "
            f"algorithm.adv_estimator={PREFIX}{estimator} (verl's {estimator} over the episodes that did not fail)"
        )
    wrap_estimator(estimator.removeprefix(PREFIX))
    if cfg.trainer.get("use_v1"):
        _check_v1(cfg)


def _check_v1(cfg: Any) -> None:
    """verl's own V1 trainer mode with τ's sampler (``sampler.overrides``), whose kwargs verl leaves alone."""
    import importlib.util

    if importlib.util.find_spec("transfer_queue") is None:
        raise ConfigError(
            "trainer.use_v1=true (verl 0.9's default) needs TransferQueue: pip install TransferQueue==0.1.11"
        )
    from slime_tau_plugin.adapters.verl.sampler import SAMPLER_PATH, SAMPLERS, TRAINER_KWARGS_OVERRIDE

    mode = str(cfg.trainer.v1.trainer_mode)
    if mode not in SAMPLERS:
        mine = mode.removeprefix("tau_")
        hint = f"; use trainer.v1.trainer_mode={mine} (verl's own)" if mine in SAMPLERS else ""
        raise ConfigError(
            f"trainer.v1.trainer_mode={mode} is not one of {', '.join(SAMPLERS)}: τ's guard and metrics ride verl's "
            f"own trainer through trainer.v1.sampler.custom_sampler{hint}"
        )
    sampler = cfg.trainer.v1.sampler
    custom = sampler.get("custom_sampler") or {}
    if custom.get("path") != SAMPLER_PATH or custom.get("name") != SAMPLERS[mode]:
        raise ConfigError(
            f"trainer.v1.sampler.custom_sampler={{path: {custom.get('path')}, name: {custom.get('name')}}} runs no τ "
            f"failure guard or τ metrics under {mode}; use path={SAMPLER_PATH} name={SAMPLERS[mode]}"
        )
    if (sampler.get("sampler_kwargs") or {}).get("tau_trainer") is None:
        raise ConfigError(f"trainer.v1.sampler.sampler_kwargs.tau_trainer is missing; add {TRAINER_KWARGS_OVERRIDE}")
    filter_groups = cfg.algorithm.get("filter_groups") or {}
    if filter_groups.get("enable") or sampler.get("sync_refill_failed_groups"):
        key = (
            "algorithm.filter_groups.enable"
            if filter_groups.get("enable")
            else "trainer.v1.sampler.sync_refill_failed_groups"
        )
        raise ConfigError(f"{key}=true is not passed by verl to a custom sampler (τ's); set it false")


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def _check_rows(key: str, file: str) -> None:
    import pandas as pd

    frame = pd.read_parquet(file)
    missing = {"data_source", "prompt", "agent_name", "extra_info"} - set(frame.columns)
    if missing:
        raise ConfigError(
            f"data.{key}={file} lacks columns {sorted(missing)}; write it with slime-tau prepare --format verl"
        )
    names = set(frame["agent_name"])
    if names - {AGENT_NAME}:
        raise ConfigError(f"data.{key}={file} has agent_name {sorted(names)}; expected {AGENT_NAME}")
    marks = {is_evaluation(info) for info in frame["extra_info"]}
    if marks != {key == "val_files"}:
        want = "evaluation rows (slime-tau prepare --eval writes them)" if key == "val_files" else "training rows"
        raise ConfigError(f"data.{key}={file} holds rows with extra_info.{EVAL_MARK}={sorted(marks)}; expected {want}")
