"""The episode loop: play one τ task against an injected policy, from a fresh start or a suspended state.

Owns: ``run`` (``EpisodeEngine``, ``run_episode``), ``live`` (what a running episode accumulates, its timed τ and
user calls), ``start`` (open fresh, or resume: replay and check), ``env_log`` (the env-call log and its replay),
``blocking`` (the doors off the event loop). May import: ``resources`` and everything below it (``episode``,
``chat``, ``net``, ``envs``, ``config``, ``users``, ``policy``, ``outcome``, ``data``, ``review``, ``shared``,
``errors``, ``choices``); never ``workers`` or anything above the engine.
"""
