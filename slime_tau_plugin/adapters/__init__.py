"""Trainer adapters: each turns the engine's typed episode into one trainer's sample format.

``slime/`` (``generate`` and slime's run hooks), ``verl/`` (the agent loop), ``trl/`` (``GRPOTrainer``'s rollout
function) and ``nemo_gym/`` (an agent server for NeMo Gym's ``/run``). Adapters import the engine, never a tool, never
each other, and play every episode through the engine's one failure boundary (``engine.loop.boundary.play_episode``,
in this process or a worker pool's): ``tests/contracts/test_layers.py`` checks each package found here.
"""
