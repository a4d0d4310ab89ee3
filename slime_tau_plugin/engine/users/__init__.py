"""The customer side of a τ episode: the ``USER_SIMULATORS`` table (``simulators``: scripted and LLM users) and
the LLM user's ``/chat/completions`` client (``chat_client``) with its exact-request cache (``request_cache``) and
a GRPO group's shared opening (``shared_opening``).

May import: ``config``, ``envs``, ``net``, ``review`` (what the customer may not say), ``errors``, ``choices``,
``shared``.
"""
