"""Numbers over finished episodes that every front door reports: pass^k and the per-domain summary with the one
rule for what is evidence (``summary``), the reward breakdown's per-domain means (``reward_breakdown``) and how
much of a pass^k is noise (``noise``), what the customer's shared opening and request cache saved (``user_share``);
the run's failure guard (``failure_guard``: too many recent episodes FAILED on one endpoint stops the run, whichever
trainer feeds it); the run's per-task record (``task_record``: attempts, passes, last step per task, a file that
survives restarts) and the curriculum's weights over it (``curriculum``).

May import: ``episode`` (the values a sample's metadata names), ``errors``; samples are read by slime's field
names, so no trainer is imported.
"""
