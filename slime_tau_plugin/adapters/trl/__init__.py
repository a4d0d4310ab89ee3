"""TRL's seam: a ``rollout_func`` for ``GRPOTrainer`` (``rollout.py``), τ's reward as a TRL reward function
(``reward.py``), the trainer's settings as a ``TauConfig`` (``config.py``) and TRL dataset rows (``rows.py``).
TRL itself is imported only where a module says so, never by ``import slime_tau_plugin``."""
