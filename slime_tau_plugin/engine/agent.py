"""The public names for the episode engine: ``TrainableAgentMixin``, ``TrainableToolCallingAgent``, ``agent_factory``.

The engine itself is :class:`loop.run.EpisodeEngine` (the loop) over :class:`resources.EpisodeResources`
(what a process shares) and an injected policy. These names are what the project's users were promised;
they are thin layers over that core, kept so code written against them keeps working:

- ``TrainableAgentMixin`` is ``EpisodeEngine`` itself under its published name (an alias, not a subclass).
- ``TrainableToolCallingAgent(config, policy, tokenizer, backend)`` binds a policy to freshly built
  resources (no cache): the shape tests and scripts use to run the engine on their own collaborators.
- ``agent_factory(config)`` builds one from config alone.

Front doors do not use these: they hand an ``EpisodeRequest`` to the failure boundary (``loop.boundary.play_episode``).
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import EnvBackend
from slime_tau_plugin.engine.loop.run import AbortCheck, EpisodeEngine
from slime_tau_plugin.engine.policy.client import PolicyClient, require_policy_url
from slime_tau_plugin.engine.resources import EpisodeResources

__all__ = ["AbortCheck", "TrainableAgentMixin", "TrainableToolCallingAgent", "agent_factory"]


TrainableAgentMixin = EpisodeEngine
"""The published name of :class:`loop.run.EpisodeEngine` (``run_episode(task, sampling_params, ...)``): the same
class, not a subclass, so ``isinstance`` and subclassing mean one thing under either name."""


class TrainableToolCallingAgent(EpisodeEngine):
    """A tool-calling agent bound to one policy, tokenizer and τ backend."""

    def __init__(
        self,
        config: TauConfig,
        policy: PolicyClient,
        tokenizer: Any,
        backend: EnvBackend,
        *,
        resources: EpisodeResources | None = None,
    ) -> None:
        """``resources`` already built for ``config`` (agent_factory's) are used as they are."""
        super().__init__(resources or EpisodeResources.build(config, tokenizer=tokenizer, backend=backend), policy)
        self.tokenizer = tokenizer

    async def aclose(self) -> None:
        """Close the HTTP sessions this agent opened on the running loop (before a script's loop ends)."""
        close = getattr(self.policy, "aclose", None)
        if close is not None:
            await close()
        await self.resources.aclose()


def agent_factory(
    config: TauConfig, *, policy: PolicyClient | None = None, tokenizer: Any = None
) -> TrainableToolCallingAgent:
    """Build an agent from config alone (policy URL and protocol, tokenizer path and benchmark come from it).

    Raises:
        MissingSettingError: no policy URL or tokenizer path is configured.
        ConfigError: they, or the parser names, cannot be used.
    """
    if policy is None:
        require_policy_url(config)
    resources = EpisodeResources.build(config, tokenizer=tokenizer)
    policy = policy or resources.policy
    return TrainableToolCallingAgent(config, policy, resources.tokenizer, resources.backend, resources=resources)
