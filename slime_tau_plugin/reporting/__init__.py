"""Run-level reporting: numbers over many finished episodes, between the engine and the adapters.

The engine plays one episode and leaves what it did in the sample's metadata; what a run reports over many of them
is here, read the same way by every trainer's adapter and the tools: pass^k and the per-domain summary with the one
rule for what is evidence (``summary``), the reward breakdown's per-domain means (``reward_breakdown``), how much of
a pass^k is noise (``noise``), what the customer cost (``customer_cost``) and what its shared opening and request
cache saved (``user_share``); one step's numbers over views of its rows (``step_views``: TRL's and verl's
``EpisodeView``); the run's failure guard (``failure_guard``: too many recent episodes FAILED on one endpoint stops
the run, whichever trainer feeds it); the run's per-task history (``task_history``: attempts, passes, last step per
task, a file that survives restarts) and the curriculum's rule over it (``curriculum_rule``). The engine never
imports this layer; adapters and tools do. Samples are read by slime's field names, so no trainer is imported.

May import: ``engine.episode`` (the values a sample's metadata names), ``engine.review`` (its per-step numbers),
``engine.errors``.
"""
