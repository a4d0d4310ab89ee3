"""Environment CPU time per τ² episode: τ² used naively vs our ``Tau2Backend``.

An episode = reset + every gold action (agent and user side) + the final message + the reward (oracle
replay, so both sides do the same work and both must score 1.0). Naive: the domain's environment
constructor (reads its database from disk) + ``set_state`` + ``get_response`` per action +
``evaluate_simulation(EvaluationType.ALL)``. Ours: ``Tau2Backend().open``, the same steps, ``reward``.
Ours is timed twice: on each task's first episode (which also builds the task's gold outcome once) and
on a repeat visit (RL samples each task many times per step). CPU time (``time.process_time``).

    python benchmarks/env_cost.py --backend tau2 [--episodes 20]
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from slime_tau_plugin.engine.envs import EnvToolCall, get_backend  # noqa: E402
from slime_tau_plugin.engine.episode.result import TerminationReason

SETS = (("retail", "train"), ("airline", "base"), ("telecom", "train"))


def _final_text(outputs: tuple[str, ...]) -> str:
    return "Done. " + "; ".join(outputs)


def naive_episode(backend: Any, ref: Any) -> float:
    """τ² as its own runner uses it: fresh environment from disk, messages, ``evaluate_simulation``."""
    m = backend.mods
    msg, sim_mod, ev = m["data_model.message"], m["data_model.simulation"], m["evaluator.evaluator"]
    task = backend.task(ref)
    env = m["registry"].registry.get_env_constructor(ref.domain)()
    state = task.initial_state
    messages = list(state.message_history or []) if state else []
    if state is not None:
        env.set_state(state.initialization_data, state.initialization_actions, messages)
    script = backend.script(ref)
    messages.append(msg.UserMessage(role="user", content=script.user_instructions))
    for i, action in enumerate(script.gold_actions):
        call = msg.ToolCall(id=f"c{i}", name=action.name, arguments=dict(action.arguments), requestor=action.requestor)
        sender = msg.AssistantMessage if action.requestor == "assistant" else msg.UserMessage
        messages += [sender(role=action.requestor, content=None, tool_calls=[call]), env.get_response(call)]
    messages.append(msg.AssistantMessage(role="assistant", content=_final_text(script.gold_outputs)))
    run = sim_mod.SimulationRun(
        id=uuid.uuid4().hex,
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=sim_mod.TerminationReason.USER_STOP,
        messages=messages,
    )
    info = ev.evaluate_simulation(
        simulation=run, task=task, evaluation_type=ev.EvaluationType.ALL, solo_mode=False, domain=ref.domain
    )
    return float(info.reward)


def our_episode(backend: Any, ref: Any) -> float:
    session = backend.open(ref)
    script = session.script
    session.record_message("user", script.user_instructions)
    for i, action in enumerate(script.gold_actions):
        call = EnvToolCall(action.name, dict(action.arguments), f"c{i}")
        (session.user_step if action.requestor == "user" else session.step)(call)
    session.record_message("assistant", _final_text(script.gold_outputs))
    return session.reward(TerminationReason.USER_STOP).reward


def _timed(fn, *args) -> tuple[float, float]:
    t0 = time.process_time()
    reward = fn(*args)
    return (time.process_time() - t0) * 1000.0, reward


def measure(domain: str, split: str, episodes: int) -> dict[str, float]:
    """Mean CPU ms per episode over the first ``episodes`` tasks of the set: naive, ours first visit, repeat."""
    backend = get_backend("tau2")
    refs = backend.task_refs(domain, split)[:episodes]
    backend.domain(domain)  # the one-off per-process load, outside the per-episode numbers
    naive = [_timed(naive_episode, backend, ref) for ref in refs]
    first = [_timed(our_episode, backend, ref) for ref in refs]
    repeat = [_timed(our_episode, backend, ref) for ref in refs]
    for name, runs in (("naive", naive), ("ours", first), ("ours again", repeat)):
        bad = [ref.task_id for ref, (_, reward) in zip(refs, runs, strict=True) if reward != 1.0]
        if bad:
            raise SystemExit(f"{domain}: {name} oracle replay did not score 1.0 on tasks {bad}")
    mean = lambda runs: sum(ms for ms, _ in runs) / len(runs)  # noqa: E731
    result = {"episodes": len(refs), "naive_ms": mean(naive), "ours_first_ms": mean(first), "ours_ms": mean(repeat)}
    result["ratio"] = result["naive_ms"] / result["ours_ms"]
    result["ratio_first"] = result["naive_ms"] / result["ours_first_ms"]
    return result
