"""Numbers over finished episodes that every front door reports: the reward breakdown's per-domain means
(``reward_breakdown``) and how much of a pass^k is noise (``noise``).

May import: nothing else of the package's (plain values in, plain values out).
"""
