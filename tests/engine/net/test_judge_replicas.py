"""Several NL-assertion judge replicas (#26), over real HTTP through τ²'s own judge call (``llm_utils.generate``,
litellm). τ²'s judge is one process-wide setting (``tau2_judge.configure_judge``, settled once per process), so
this test does not configure it: it hands τ²'s call the same ``ReplicaArgs`` the setting holds and scores through
the judge's replica set as ``runner._score`` does (``guarded_on_replicas`` + ``on_replica`` + ``run_blocking``).
Two live judges and a dead one: every call is answered, both live judges are asked, the dead one costs a failover.
"""

from __future__ import annotations

import asyncio
import json

from slime_tau_plugin.engine.envs.tau2_judge import ReplicaArgs
from slime_tau_plugin.engine.errors import JudgeError
from slime_tau_plugin.engine.loop.blocking import run_blocking
from slime_tau_plugin.engine.net.endpoints import EndpointRole, GuardSettings
from slime_tau_plugin.engine.net.replicas import ReplicaSet, on_replica
from slime_tau_plugin.engine.net.retry import guarded_on_replicas
from slime_tau_plugin.engine.net.stats import NetStats, episode_stats
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from tests.engine.envs.test_nl_assertions import ASSERTION, judge_reply
from tests.engine.net.test_user_replicas import _dead_url


def test_judge_calls_are_spread_over_replicas_and_a_dead_one_costs_a_failover_not_a_score(tau2_backend):
    import importlib

    message = tau2_backend.mods["data_model.message"]  # τ² imported by the backend, litellm kept offline
    generate = importlib.import_module("tau2.utils.llm_utils").generate  # the call evaluate_nl_assertions makes
    judges = [ChatUserServer(reply=judge_reply, latency_s=0.1).start() for _ in range(2)]
    dead = _dead_url()
    urls = [dead, *(j.base_url for j in judges)]
    args = ReplicaArgs({"api_key": "EMPTY", "temperature": 0.0, "timeout": 10.0, "num_retries": 0}, urls[0])
    replicas = ReplicaSet.for_urls(EndpointRole.JUDGE, urls, GuardSettings(outage_tolerance_s=5.0))
    conversation = f"assistant: I am sorry for the trouble.\n\nexpectedOutcomes:\n{ASSERTION}"
    messages = [
        message.SystemMessage(role="system", content="judge"),
        message.UserMessage(role="user", content=conversation),
    ]

    def judge_once() -> bool:  # what τ²'s evaluate_nl_assertions does with its module-level arguments
        try:
            answer = generate(model="openai/judge-model", messages=messages, **args)
        except Exception as exc:  # litellm's errors, as tau2_reward turns them into JudgeError
            raise JudgeError(str(exc)) from exc
        return json.loads(answer.content)["results"][0]["metExpectation"]

    async def score(guard) -> bool:
        return await run_blocking(on_replica(guard.url, judge_once), timeout=30.0)

    async def main() -> tuple[list[bool], NetStats]:
        with episode_stats(NetStats()) as stats:
            verdicts = await asyncio.gather(
                *(guarded_on_replicas(score, replicas, JudgeError, "judge") for _ in range(8))
            )
        return list(verdicts), stats

    try:
        verdicts, stats = asyncio.run(main())
    finally:
        for judge in judges:
            judge.stop()
    assert verdicts == [True] * 8  # every call judged, by a live replica
    assert all(len(judge.requests) >= 2 for judge in judges), [len(j.requests) for j in judges]
    assert sum(len(j.requests) for j in judges) == 8
    assert stats.replica_failures.get(f"judge {dead}", 0) >= 1  # the dead replica was tried, then left
