"""Chat text <-> tokens: chat templates (continuation ids, the probe that refuses what cannot render τ, the text
arithmetic), the Rust-tokenizer encoder, tool-call parsing (model text -> action) and the tools-in-system prompt.

May import: ``engine.errors``, ``engine.choices`` only: no network, no τ, no config.
"""
