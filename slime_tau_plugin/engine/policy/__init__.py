"""The policy seam: what the loop asks of the model (``client``: ``PolicyClient``, ``GenerateResult``,
``FinishReason``, the ``POLICY_CLIENTS`` table) and one client per wire protocol (``sglang``, ``openai``,
``nemo_rl``).

May import: ``config``, ``net``, ``shared``, ``errors``, ``choices``, ``chat`` (``nemo_rl``: the tokenizer's EOS);
the clients are reached through the table, by dotted path.
"""
