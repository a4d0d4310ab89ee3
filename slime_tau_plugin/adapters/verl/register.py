"""What verl's processes import through ``VERL_USE_EXTERNAL_MODULES=slime_tau_plugin.adapters.verl.register``:
the ``tau_grpo`` advantage estimator (``advantage.py``), the ``tau_*`` V1 trainer modes (``trainer.py``, only
where TransferQueue is installed: verl's batch trainer does not need it) and the ``tau_agent`` loop."""

from __future__ import annotations

import importlib.util

from slime_tau_plugin.adapters.verl import advantage, agent_loop  # noqa: F401  (registration on import)

if importlib.util.find_spec("transfer_queue") is not None:
    from slime_tau_plugin.adapters.verl import trainer  # noqa: F401
