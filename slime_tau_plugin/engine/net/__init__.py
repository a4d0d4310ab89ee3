"""The network every episode of a process shares: endpoint guards (``endpoints``: slots, outage clock, breaker),
the one retry helper (``retry``), the reading of an HTTP error (``http_errors``), one aiohttp session per loop
(``loop_http``), replicas of a role (``replicas``), each episode's network bookkeeping (``stats``) and the LLM
user's token budget (``user_budget``).

May import: ``shared``, ``errors`` only.
"""
