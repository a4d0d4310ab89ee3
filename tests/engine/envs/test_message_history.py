"""τ² tasks that begin mid-conversation (``initial_state.message_history``) start as τ²'s own orchestrator starts them.

Each mock task with a history, and variants of one whose history ends elsewhere (a user's text, the answer to the
agent's call, the user's stop), is played by τ²'s ``Orchestrator`` with its own ``LLMAgent`` and ``UserSimulator``
and by our engine with the LLM user. Every LLM is one of our servers on 127.0.0.1 that records what it was sent (τ²
reaches them through litellm). Both start with the same speaker; the user simulator's first request carries the same
messages; the model's first prompt is, id for id, τ²'s agent request rendered by the chat template as SGLang's chat
endpoint would (arguments as objects), with one known difference swapped in: τ²'s agent system prompt wraps the domain
policy in agent instructions, ours is the policy alone. The history is in the prompt, so never trained on. Then the
oracle with the scripted user solves each task for τ²'s reward, and a suspended one resumes to the uninterrupted one.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.envs import FirstMove, TaskRef
from slime_tau_plugin.engine.episode.result import TerminationReason
from slime_tau_plugin.engine.episode.state import EpisodeState
from slime_tau_plugin.engine.loop.run import run_episode
from slime_tau_plugin.engine.resources import EpisodeResources
from slime_tau_plugin.tools.servers import oracle_scripts
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer
from slime_tau_plugin.tools.servers.fake_models import ScriptedModel
from slime_tau_plugin.tools.servers.sglang_server import SGLangServer
from tests.conftest import require_sglang_parsers
from tests.engine.loop.test_resume import CuttableOracle, Sessions, _abort_at, _view
from tests.episodes import play_all

require_sglang_parsers()
pytest.importorskip("tau2")

from tau2.agent.llm_agent import LLMAgent  # noqa: E402
from tau2.orchestrator.orchestrator import Orchestrator, Role  # noqa: E402
from tau2.registry import registry  # noqa: E402
from tau2.user.user_simulator import UserSimulator  # noqa: E402

AGENT_SAYS = "Which task would you like me to update?"
"""What both agents say first (τ²'s from its chat server, ours from the scripted policy)."""
SAMPLING = {"max_new_tokens": 512, "temperature": 0.0}
FIRST_MOVES = {Role.USER: FirstMove.USER, Role.AGENT: FirstMove.AGENT}
_NONE = SimpleNamespace(message_history=None)


def history_refs(backend) -> list[TaskRef]:
    """The mock tasks with a history, and variants of the first whose history ends with a user's text, the
    answer to the agent's tool call, and the user's stop."""
    refs = [r for r in backend.task_refs("mock", "base") if (backend.task(r).initial_state or _NONE).message_history]
    dump = backend.task_dump(refs[0])
    history = dump["initial_state"]["message_history"]
    stop = {"role": "user", "content": "Thanks, that was all. ###STOP###"}
    variants = {"ends-with-user": history[:1], "ends-with-tool": history[:3], "ends-with-stop": [*history, stop]}
    for name, messages in variants.items():
        task = {**dump, "id": name, "initial_state": {**dump["initial_state"], "message_history": messages}}
        refs.append(TaskRef("tau2", "mock", "base", name, task))
    return refs


def normalized(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Role, content, tool calls (id, name, arguments as objects) and the call a tool message answers."""
    out = []
    for m in messages:
        calls = [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m.get("tool_calls") or []
        ]
        out.append({"role": m["role"], "content": m.get("content") or "", "calls": calls, "id": m.get("tool_call_id")})
    return out


def as_sglang_renders(messages: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    """τ²'s agent request as SGLang's chat endpoint hands it to the template (arguments parsed), our system prompt."""
    out = [{"role": "system", "content": system}]
    for m in messages[1:]:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
        out.append(m)
    return out


class Tau2Side:
    """τ²'s orchestrator with its own LLM agent and user simulator, each on a recording chat server."""

    def __init__(self, task) -> None:
        self.agent = ChatUserServer(reply=lambda messages, tools: {"role": "assistant", "content": AGENT_SAYS}).start()
        self.user = ChatUserServer(max_replies=5).start()
        env = registry.get_env_constructor("mock")()
        args = {"api_key": "none", "num_retries": 0}
        self.orchestrator = Orchestrator(
            "mock",
            agent=LLMAgent(
                env.get_tools(), env.get_policy(), "openai/agent", {**args, "api_base": self.agent.base_url}
            ),
            user=UserSimulator(None, str(task.user_scenario), "openai/user", {**args, "api_base": self.user.base_url}),
            environment=env,
            task=task,
        )

    def play_until_both_spoke(self) -> None:
        orchestrator = self.orchestrator
        orchestrator.initialize()
        self.first = orchestrator.to_role
        for _ in range(4):
            if orchestrator.done or (self.agent.requests and self.user.requests):
                break
            orchestrator.step()

    def stop(self) -> None:
        self.agent.stop()
        self.user.stop()


def play_ours(backend, ref, tokenizer, tokenizer_dir):
    """Our engine with the LLM user on a recording chat server: one model turn, then the user's answer."""
    user = ChatUserServer(max_replies=5).start()
    policy = SGLangServer(ScriptedModel(tokenizer, [AGENT_SAYS])).start()
    config = TauConfig(
        benchmark="tau2",
        domain="mock",
        split="base",
        policy_url=policy.url,
        tokenizer_path=tokenizer_dir,
        user="llm",
        user_base_url=user.base_url,
        user_model="user",
        max_turns=1,
    )
    resources = EpisodeResources.build(config, tokenizer=tokenizer, backend=backend)
    try:
        (result,) = play_all(resources, [ref], SAMPLING)
        return result, [r["input_ids"] for r in policy.requests], list(user.requests)
    finally:
        user.stop()
        policy.stop()


@pytest.fixture(scope="module")
def refs(tau2_backend):
    return history_refs(tau2_backend)


def test_the_model_and_the_user_start_from_the_history_as_in_tau2_orchestrator(refs, tau2_backend, qwen25, qwen25_dir):
    backend = Sessions(tau2_backend)
    seen = set()
    for ref in refs:
        task = backend.task(ref)
        theirs = Tau2Side(task)
        try:
            theirs.play_until_both_spoke()
        finally:
            theirs.stop()
        result, prompts, user_requests = play_ours(backend, ref, qwen25, qwen25_dir)
        session = backend.opened[-1]
        seen.add(session.history.first_move)
        if theirs.orchestrator.done:  # the history ends with the user's stop: over before the model's turn
            assert theirs.orchestrator.termination_reason.value == "user_stop"
            assert session.history.first_move is FirstMove.USER_STOPPED
            assert (result.termination, prompts, user_requests) == (TerminationReason.USER_STOP, [], [])
            assert result.reward == session.reference_reward(result.termination).reward
            assert result.review is not None and result.review.stop is None  # τ's stop, not the simulator's
            continue
        assert FIRST_MOVES[theirs.first] is session.history.first_move, ref.task_id
        assert result.error is None and result.termination is TerminationReason.MAX_TURNS, result.error
        tau2_user, tau2_agent = theirs.user.requests[0]["messages"], theirs.agent.requests[0]
        assert normalized(user_requests[0]["messages"]) == normalized(tau2_user), ref.task_id
        rendered = qwen25.apply_chat_template(
            as_sglang_renders(tau2_agent["messages"], session.agent_system_prompt),
            tools=tau2_agent["tools"],
            add_generation_prompt=True,
            tokenize=False,
        )
        assert prompts[0] == qwen25.encode(rendered, add_special_tokens=False), ref.task_id
        assert list(result.trajectory.prompt_ids) == prompts[0]  # the history is prompt: never trained on
        history_said = [m["content"] for m in session.history.agent_view if m["content"]]
        assert all(text in rendered for text in history_said)
    assert seen == {FirstMove.USER, FirstMove.AGENT, FirstMove.USER_STOPPED}


@pytest.fixture(scope="module")
def oracle(qwen25, tau2_backend):
    model = CuttableOracle(qwen25, oracle_scripts([("tau2", "mock", "base")]))
    server = SGLangServer(model).start()
    yield server, model
    server.stop()


def oracle_config(server, tokenizer_dir) -> TauConfig:
    return TauConfig(benchmark="tau2", domain="mock", split="base", policy_url=server.url, tokenizer_path=tokenizer_dir)


def test_the_oracle_and_the_scripted_user_solve_tasks_with_history_for_tau2s_reward(
    refs, tau2_backend, oracle, qwen25, qwen25_dir
):
    server, _ = oracle
    backend = Sessions(tau2_backend)
    resources = EpisodeResources.build(oracle_config(server, qwen25_dir), tokenizer=qwen25, backend=backend)
    tasks = [r for r in refs if r.task is None]  # τ²'s own, not the variants
    for ref, result, session in zip(tasks, play_all(resources, tasks, SAMPLING), backend.opened, strict=True):
        assert result.termination is TerminationReason.USER_STOP and result.reward == 1.0, (ref.task_id, result.error)
        reference = session.reference_reward(result.termination)  # τ²'s evaluate_simulation on this episode
        assert result.reward == reference.reward
        assert {k: v for k, v in result.reward_info.items() if k != "note"} == {
            k: v for k, v in reference.breakdown.items() if k != "note"
        }
        history = session.history.agent_view
        assert list(result.messages[1 : 1 + len(history)]) == list(history)
        assert result.messages[1 + len(history)]["content"] == session.script.user_instructions


def test_a_suspended_episode_with_history_resumes_to_the_uninterrupted_one(refs, tau2_backend, oracle, qwen25_dir):
    server, model = oracle
    sessions = Sessions(tau2_backend)
    resources = EpisodeResources.build(oracle_config(server, qwen25_dir), backend=sessions)
    ref = refs[0]

    async def play(**kwargs):
        result = await run_episode(resources, resources.policy, ref, dict(SAMPLING), **kwargs)
        return result, sessions.opened[-1].state_hash()

    async def main() -> int:
        full, full_hash = await play()
        want = _view(full, full_hash)
        checked = 0
        for turn in range(full.num_turns):
            for cut in (None, model):
                part, _ = await play(should_abort=_abort_at(turn, cut), suspend=True)
                state = EpisodeState.from_json(json.dumps(part.state.to_json()))
                done, done_hash = await play(resume=state)
                assert done.error is None, done.error
                assert _view(done, done_hash) == want, (turn, cut is not None)
                checked += 1
        return checked

    try:
        assert asyncio.run(main()) == 4
    finally:
        asyncio.run(resources.aclose())
