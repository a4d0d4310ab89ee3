"""The customer side of a τ episode: the ``USER_SIMULATORS`` table (``simulators``: scripted and LLM users) and
the LLM user's ``/chat/completions`` client (``chat_client``).

May import: ``config``, ``envs``, ``net``, ``errors``, ``choices``.
"""
