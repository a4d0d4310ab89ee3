"""The episode engine: one τ episode from config alone, token-exact, trainer-free.

Episode loop, trajectory, templates, tool calls, policy clients, users, environments, config and errors. Nothing here
imports slime, verl or anything under ``slime_tau_plugin.adapters`` or ``slime_tau_plugin.tools``: the same engine
serves every trainer, and a tool wraps it from outside.
"""
