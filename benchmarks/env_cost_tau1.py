"""Environment CPU time per τ-bench v1 episode: v1 used naively vs our ``Tau1Backend``.

An episode = reset + every gold action + the final message that ends it + the reward (oracle replay, so
both sides do the same work and both must score 1.0). Naive: ``get_env`` + ``env.reset(task_index)`` +
``env.step`` per action + the final ``respond`` whose ``###STOP###`` makes v1 compute its reward (it reloads
its JSON, replays the gold actions and hashes the whole database twice). Ours: ``Tau1Backend().open``,
the same steps, ``reward``. CPU time (``time.process_time``), so a busy machine inflates it less.

    python benchmarks/env_cost.py --backend tau1 [--episodes 20]
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm (imported by tau_bench) stays offline

from slime_tau_plugin.engine.envs.base import EnvToolCall, TaskRef  # noqa: E402
from slime_tau_plugin.engine.envs.tau1 import Tau1Backend  # noqa: E402
from slime_tau_plugin.engine.envs.tau1_data import scripted_v1_user  # noqa: E402
from slime_tau_plugin.engine.episode.result import TerminationReason

_backend: Tau1Backend | None = None


def _final_message(outputs: list[str]) -> str:
    return "Done. " + "; ".join(outputs)


def naive_episode(domain: str, split: str, index: int, actions: list[Any], outputs: list[str]) -> float:
    """One oracle episode through v1's own Env; returns v1's reward."""
    from tau_bench.envs import get_env
    from tau_bench.types import Action

    env = get_env(domain, user_strategy="human", user_model="none", task_split=split, task_index=index)
    env.user = scripted_v1_user()
    env.reset(task_index=index)
    for action in actions:
        res = env.step(action)
        if res.done:
            return float(res.reward)
    env.user.stop_next = True
    res = env.step(Action(name="respond", kwargs={"content": _final_message(outputs)}))
    assert res.done
    return float(res.reward)


def ours_episode(backend: Tau1Backend, ref: TaskRef, calls: list[EnvToolCall], outputs: list[str]) -> float:
    """The same episode through Tau1Session; returns our reward."""
    session = backend.open(ref)
    for call in calls:
        if session.step(call).is_done:
            return session.reward(TerminationReason.AGENT_STOP).reward
    session.record_message("assistant", _final_message(outputs))
    return session.reward(TerminationReason.USER_STOP).reward


def measure(domain: str, split: str, episodes: int) -> dict[str, float]:
    """Mean env CPU ms per oracle episode over ``episodes`` tasks in v1's order: naive v1, ours on a task's
    first episode (which builds its gold outcome once), ours on a repeat visit."""
    global _backend
    from tau_bench.types import Action

    if _backend is None:
        _backend = Tau1Backend()
    backend = _backend
    backend.domain(domain)  # one-time per process, like v1's imports: not part of an episode
    tasks = backend.tasks(domain, split)
    refs = backend.task_refs(domain, split)
    naive_s = first_s = repeat_s = 0.0
    for k in range(episodes):
        i = k % len(tasks)
        task = tasks[i]
        outputs = list(task.outputs)
        actions = [Action(name=a.name, kwargs=copy.deepcopy(a.kwargs)) for a in task.actions]
        calls = [EnvToolCall(a.name, copy.deepcopy(a.kwargs), f"c{j}") for j, a in enumerate(task.actions)]
        t0 = time.process_time()
        naive_reward = naive_episode(domain, split, i, actions, outputs)
        t1 = time.process_time()
        first_reward = ours_episode(backend, refs[i], calls, outputs)  # also builds the task's gold outcome
        t2 = time.process_time()
        repeat_reward = ours_episode(backend, refs[i], calls, outputs)
        t3 = time.process_time()
        assert naive_reward == first_reward == repeat_reward == 1.0, (domain, split, i, naive_reward, first_reward)
        naive_s, first_s, repeat_s = naive_s + t1 - t0, first_s + t2 - t1, repeat_s + t3 - t2
    naive_ms, first_ms, ours_ms = (1000 * x / episodes for x in (naive_s, first_s, repeat_s))
    return {
        "episodes": episodes,
        "naive_ms": naive_ms,
        "ours_first_ms": first_ms,
        "ours_ms": ours_ms,
        "ratio_first": naive_ms / first_ms,
        "ratio": naive_ms / ours_ms,
    }
