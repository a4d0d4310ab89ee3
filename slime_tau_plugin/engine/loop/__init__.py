"""The episode loop: play one τ task against an injected policy, from a fresh start or a suspended state.

Owns: ``boundary`` (``play_episode``: a request in, a result or FAILED out), ``run`` (``EpisodeEngine.play``,
``run_episode``), ``turns`` (``TurnLoop``: one method per turn state), ``live`` (``LiveEpisode``: the one state of a
running episode), ``start`` (open fresh, or resume: replay and check), ``env_log`` (the env-call log and its replay),
``blocking`` (the doors off the event loop, the episode's timed τ and user calls). May import: ``resources`` and
everything below it (``episode``, ``chat``, ``net``, ``envs``, ``config``, ``users``, ``policy``, ``outcome``,
``data``, ``review``, ``shared``, ``errors``, ``choices``); never ``workers`` or anything above the engine.
"""
