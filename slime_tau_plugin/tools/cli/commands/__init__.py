"""The ``slime-tau`` CLI: one module per ``slime-tau`` subcommand: ``add_parser(sub)`` and ``run(ns)`` (``main.py``
dispatches).
"""
