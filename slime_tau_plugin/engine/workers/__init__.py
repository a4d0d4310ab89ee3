"""Episodes outside the trainer's process: one request in, one finished episode out.

A front door (slime's ``generate``, the CLI) turns its sample into an :class:`~.messages.EpisodeRequest` and gets
back a :class:`~.messages.FinishedEpisode`; :func:`~.play.play_request` is the one function that plays a request,
in the trainer's process (``tau_episode_workers: 0``), in a worker process (``process_pool.py``) or in a Ray actor
(``ray_actors.py``), so the three give the same samples. ``pools.py`` picks the place from the config.

May import: ``loop``, ``resources``, ``outcome``, ``data``, ``config``, ``episode``, ``shared``, ``errors``,
``choices``; never an adapter (the front doors import this).
"""
