"""Trainer adapters: each turns the engine's typed episode into one trainer's sample format.

``slime/`` (``generate`` and slime's run hooks) and ``verl/`` (the agent loop). Adapters import the engine, never a
tool; neither imports the other.
"""
