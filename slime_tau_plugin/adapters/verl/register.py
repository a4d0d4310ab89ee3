"""What verl's processes import through ``VERL_USE_EXTERNAL_MODULES=slime_tau_plugin.adapters.verl.register``:
the ``tau_<name>`` advantage estimators (``advantage.py``) and the ``tau_agent`` loop. τ's V1 sampler
(``sampler.py``) is not imported here: verl loads it by name (``trainer.v1.sampler.custom_sampler``)."""

from __future__ import annotations

from slime_tau_plugin.adapters.verl import advantage, agent_loop  # noqa: F401  (registration on import)
