"""verl's recipes that run their own trainers, refused in one line (the agent loop at its start, the launch check).

Apart from the loop and the launch check so that both can import it without importing each other.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.errors import ConfigError

RECIPES = {
    "async_training": "verl's fully-async recipe (verl.experimental.fully_async_policy)",
    "rollout": "verl's one-step-off recipe (verl.experimental.one_step_off_policy)",
}
"""Top-level keys only a recipe's trainer config has, and the recipe each marks."""


def refuse_recipes(trainer_config: Any) -> None:
    """Refuse verl's fully-async and one-step-off recipes in one line.

    They run their own trainers, not V1's replay buffer: τ's failure guard and step metrics (``sampler.py``) would
    not run, and their rollout loops are not tested with this loop on CPU. ``tau_<name>`` and the loop would work.

    Raises:
        ConfigError: the config is a recipe's, naming the recipe and the supported trainers.
    """
    for key, recipe in RECIPES.items():
        if trainer_config.get(key) is not None:
            raise ConfigError(
                f"{recipe} (config key {key}) is not supported by slime_tau_plugin: its failure guard and τ metrics "
                "run in verl's V1 replay buffer; use trainer.use_v1=true trainer.v1.trainer_mode=sync (or "
                "colocate_async) with slime_tau_plugin.adapters.verl.sampler (see docs/verl.md)"
            )
