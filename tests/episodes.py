"""Playing episodes straight through the engine in a test: one loop, its HTTP sessions closed with it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.episode.result import EpisodeResult
from slime_tau_plugin.engine.loop.run import run_episode
from slime_tau_plugin.engine.resources import EpisodeResources


def play_all(resources: EpisodeResources, refs: Sequence[Any], sampling: dict[str, Any]) -> list[EpisodeResult]:
    """Play ``refs`` one after another with the resources' policy, on a fresh loop (a copy of ``sampling`` each)."""

    async def play() -> list[EpisodeResult]:
        try:
            return [await run_episode(resources, resources.policy, ref, dict(sampling)) for ref in refs]
        finally:
            await resources.aclose()

    return asyncio.run(play())
