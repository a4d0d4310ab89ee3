"""NeMo Gym entry point: :class:`TauAgent`, a τ agent server on NeMo Gym's own ``SimpleResponsesAPIAgent``.

A row (NeMo Gym's ``/run`` body) names one task, ``{"responses_create_params": {"input": []}, "task":
"tau2/retail/train/7", "seed": 3}``; ``/run`` plays that one episode through the engine's failure boundary
(``play_episode`` and ``finish_episode``, the calls slime's ``generate`` makes; policy = the generation server
behind the model server NeMo Gym names, user = ours) and answers NeMo Gym's verify response: ``response.output``
holds one training message per model turn with its ``prompt_token_ids``, ``generation_token_ids`` and
``generation_log_probs``, ``reward`` is τ's.

Outcomes: an episode that must not train (the user simulator, the policy server or the environment failed; a
run-level cut-off) is dropped by each consumer's own means, never with a null reward (NeMo RL reads
``float(reward)`` of every row): ``instance_config.mask_sample`` (NeMo RL zeroes the row's loss) with reward 0.0,
and the failure field ``_ng_failure_class``, so NeMo Gym's rollout collection writes it to
``<output>_failures.jsonl`` (retried up to ``NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`` on resume, ``_ng_failure_terminal``
for cut-offs), never to the rollouts the metrics read. It is HTTP 200: NeMo RL's synchronous GRPO stops the run on
any error status. A wrong setting or a row that names no task is HTTP 400 with one line.

The resources-server verbs are served here too: ``/seed_session`` checks a row's task, ``/verify`` returns the
reward ``/run`` attached to its response (τ scored the episode when it ended; nothing is re-played).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Body, FastAPI, HTTPException
from nemo_gym.base_resources_server import (
    AggregateMetrics,
    AggregateMetricsRequest,
    BaseRunRequest,
    BaseSeedSessionRequest,
    BaseVerifyRequest,
)
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent
from nemo_gym.config_types import ModelServerRef
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from slime_tau_plugin.adapters.nemo_gym.response import NG_FAILURE_CLASS_KEY, failure_fields, gym_response, tau_fields
from slime_tau_plugin.adapters.nemo_gym.settings import (
    agent_config,
    model_server_policy,
    sampling_params,
    task_metadata,
)
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.episode.request import EpisodeRequest
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.loop.boundary import play_episode
from slime_tau_plugin.engine.outcome import training_reward
from slime_tau_plugin.engine.workers.play import finish_episode


class TauAgentConfig(BaseResponsesAPIAgentConfig):
    """The agent's entry in NeMo Gym's config (``<name>.responses_api_agents.<type>``)."""

    model_server: ModelServerRef | None = None
    """The policy: NeMo Gym's model server (its ``base_url`` is played), unless ``tau.tau_policy_url`` is set."""
    tau: dict[str, Any] = Field(default_factory=dict)
    """``tau_*`` settings, as in slime's YAML (``tau_tokenizer_path`` is required)."""
    evaluation: bool = False
    """Score as an evaluation (no ``tau_reward_shaping``)."""


class TauRunRequest(BaseRunRequest):
    """One row: the task to play and, optionally, its sampling seed."""

    model_config = ConfigDict(extra="allow")
    task: str
    seed: int | None = None


class TauSeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")
    task: str


class TauSeedSessionResponse(BaseModel):
    task: str
    benchmark: str
    domain: str
    split: str


class TauVerifyResponse(BaseVerifyRequest):
    """NeMo Gym's verify response with τ's own fields (a failed rollout: reward 0.0, masked, failure field set)."""

    model_config = ConfigDict(extra="allow")
    reward: float


class TauAgent(SimpleResponsesAPIAgent):
    """``TauAgent(config=TauAgentConfig(...), server_client=...)``; ``serve.build_agent`` makes one."""

    config: TauAgentConfig
    _tau_configs: dict[str, TauConfig] = PrivateAttr(default_factory=dict)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/seed_session")(self.seed_session)
        app.post("/verify")(self.verify)
        return app

    def tau_config(self, benchmark: str | None = None) -> TauConfig:
        """The episode config for rows of ``benchmark`` (default: the settings' own), built once each: the engine
        plays one benchmark per config (``tau_benchmark``), and a row names its own. ``serve.build_agent``
        builds the default one at startup, so a wrong setting is refused there, not per row."""
        if not self._tau_configs:
            policy = None
            if self.config.model_server is not None and not self.config.tau.get("tau_policy_url"):
                name = self.config.model_server.name
                entry = server_entry(self.server_client.global_config_dict, name)
                policy = model_server_policy(name, entry, self.config.tau.get("tau_policy_api"))
            self._tau_configs[""] = agent_config(self.config.tau, policy)
        base = self._tau_configs[""]
        if not benchmark or benchmark == base.benchmark:
            return base
        if benchmark not in self._tau_configs:
            self._tau_configs[benchmark] = TauConfig(**{**base.model_dump(exclude_unset=True), "benchmark": benchmark})
        return self._tau_configs[benchmark]

    async def responses(self, body: Annotated[NeMoGymResponseCreateParamsNonStreaming, Body()]) -> NeMoGymResponse:
        raise HTTPException(501, "the τ agent plays whole episodes: POST /run with a task, not /v1/responses")

    async def run(self, body: Annotated[TauRunRequest, Body()]) -> TauVerifyResponse:
        try:
            metadata = task_metadata(body.task, self.tau_config())
            config = self.tau_config(metadata["benchmark"])
            params = sampling_params(body.responses_create_params.model_dump(exclude_unset=True), body.seed)
            request = EpisodeRequest(uuid.uuid4().hex, None, metadata, params)
            finished = await finish_episode(await play_episode(config, request))
        except ConfigError as exc:
            raise HTTPException(400, " ".join(str(exc).split())) from None
        result = finished.result
        trains = result.termination.is_trainable
        reward = training_reward(result, config, evaluation=self.config.evaluation) if trains else None
        answer = body.model_dump(exclude_unset=True)
        answer["response"] = gym_response(finished, config, body.responses_create_params.model or "", reward)
        answer["reward"] = reward
        answer.update(tau_fields(finished))
        answer.update(failure_fields(result, answer.get("instance_config")))
        return TauVerifyResponse.model_validate(answer)

    async def aggregate_metrics(self, body: Annotated[AggregateMetricsRequest, Body()]) -> AggregateMetrics:
        """NeMo Gym's aggregation over the rollouts that finished: a failed (masked) one is not scored."""
        kept = [row for row in body.verify_responses if NG_FAILURE_CLASS_KEY not in row]
        return await super().aggregate_metrics(AggregateMetricsRequest(verify_responses=kept))

    async def seed_session(self, body: Annotated[TauSeedSessionRequest, Body()]) -> TauSeedSessionResponse:
        try:
            metadata = task_metadata(body.task, self.tau_config())
        except ConfigError as exc:
            raise HTTPException(400, " ".join(str(exc).split())) from None
        return TauSeedSessionResponse(
            task=body.task, benchmark=metadata["benchmark"], domain=metadata["domain"], split=metadata["split"]
        )

    async def verify(self, body: Annotated[BaseVerifyRequest, Body()]) -> TauVerifyResponse:
        meta = body.response.metadata or {}
        if "tau_status" not in meta:
            raise HTTPException(400, "this response was not played by the τ agent's /run (no tau_status metadata)")
        reward = meta.get("tau_reward")
        if reward in (None, "", "null"):
            raise HTTPException(409, f"the episode did not finish trainably ({meta['tau_status']}): no reward")
        return TauVerifyResponse.model_validate(body.model_dump(exclude_unset=True) | {"reward": float(reward)})


def server_entry(global_config: Any, name: str) -> dict[str, Any]:
    """A server's own config in NeMo Gym's global config (``<name>.<server type>.<implementation>``)."""
    try:
        entry = global_config[name]
        entry = next(iter(entry.values()))
        entry = next(iter(entry.values()))
    except (KeyError, StopIteration, AttributeError, TypeError):
        raise ConfigError(f"server {name} is not in NeMo Gym's config") from None
    return OmegaConf.to_container(entry, resolve=True) if OmegaConf.is_config(entry) else dict(entry)
