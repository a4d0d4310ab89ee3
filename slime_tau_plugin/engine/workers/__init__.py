"""Episodes outside the trainer's process: one request in, one finished episode out.

A front door (slime's ``generate``, the CLI, TRL, NeMo Gym) turns its sample into an :class:`~.messages.EpisodeRequest`
and gets back a :class:`~.messages.FinishedEpisode`: the failure boundary (``loop/boundary.play_episode``) and
:func:`~.play.finish_episode` play and finish a request in the trainer's process (``tau_episode_workers: 0``), in a
worker process (``process_pool.py``) or in a Ray actor (``ray_actors.py``, both through ``host.py``), so the three
give the same samples. ``registry.pool_for`` picks the place from the config.

May import: ``loop``, ``resources``, ``outcome``, ``config``, ``episode``, ``shared``, ``errors``, ``choices``;
never an adapter (the front doors import this).
"""
