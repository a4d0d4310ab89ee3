"""The ``slime-tau`` command: ``prepare``, ``serve``, ``rollout``, ``show`` (see ``main.py``)."""

from .main import main

__all__ = ["main"]
