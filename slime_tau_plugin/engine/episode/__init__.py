"""What one episode is, as values: what a door asks for (``request``), its task (``task_ref``), token ledger
(``trajectory``), τ's ending rules (``limits``), a suspended episode's state (``state``) and the typed result
(``result``).

Owns: ``EpisodeRequest`` / ``EpisodeOptions``, ``TaskRef``, ``Trajectory`` / ``TokenBudget``, ``EpisodeLimits`` /
``StepLedger``, ``EpisodeState``, ``TerminationReason`` / ``EpisodeResult``.

May import: ``engine.errors``, ``engine.choices``, ``engine.review`` (a result holds the review's verdict); never
``envs``, ``config`` or the loop, which sit above it and all speak these values.
"""
