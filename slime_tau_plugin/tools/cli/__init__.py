"""The ``slime-tau`` command: ``prepare``, ``serve``, ``rollout``, ``show`` (see ``main.py``)."""

from slime_tau_plugin.tools.cli.main import main

__all__ = ["main"]
