"""``slime-tau soak``: thousands of episodes through ``generate`` with faults, outages and a memory watch.

The soak plays slime's part: one event loop, many ``generate`` calls at once, a ``Sample`` that refuses what
slime refuses. The policy server and the LLM-user server run in their own processes (``children``), so an
outage is a real process killed and started again. One job per module:

- ``plan``: the run's settings, the ``--outage`` and ``--kinds`` grammar, the fault spec of each target;
- ``children``: the server processes (start, health, ``/faults``, kill, restart); ``serve_policy``: the
  policy process (``slime-tau serve``'s oracle with bounded request logs);
- ``strict_sample``: slime's ``Sample`` when importable, else a stand-in that enforces its rules;
- ``checks``: what a finished sample must satisfy (aligned lengths, a status);
- ``monitor``: the event-loop stall watchdog and RSS;
- ``driver``: the episodes themselves; ``report``: what is printed and written.

Nothing here is imported by the plugin's training path.
"""
