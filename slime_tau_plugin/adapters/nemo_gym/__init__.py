"""NeMo Gym front door: a τ agent server on NeMo Gym's own server classes and schemas (docs/nemo_gym.md).

``agent.TauAgent`` (``/run``, ``/seed_session``, ``/verify``, ``/aggregate_metrics``), ``serve`` (build and
serve one, as ``slime-tau serve-gym`` does), ``response`` (a played episode in NeMo Gym's schema),
``settings`` and ``turns`` (no NeMo Gym import; ``turns.run_trajectory`` turns a ``/run`` answer back into
slime's tokens, mask, log-probs and reward). Importing this package imports nothing; ``agent``, ``response`` and
``serve`` need ``nemo-gym`` (tested: 0.4.0).
"""
