"""Reward parity for the τ-bench v1 backend: our cheap reward == our reference == v1's own naive episode.

Each episode is played twice: through ``Tau1Session`` (``reward`` and ``reference_reward``) and through an
unmodified v1 ``Env`` from ``get_env(..., task_index=i)`` driven by ``env.step(Action(...))`` with a user
that does not call an LLM, reading the reward v1 returns when the episode is done. Action sequences vary
around the gold solution (dropped, perturbed, extra writes, ints sent as floats, errors, transfers, outputs
said or not) so both rewards occur often. Tool observations must match v1's too.

v1 costs ~0.3 s (retail) to ~0.8 s (airline) per episode per path (JSON reloads, two whole-DB hashes), so
episodes run in a process pool.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm (imported by tau_bench) stays offline
pytest.importorskip("tau_bench")

from slime_tau_plugin.engine.envs.base import EnvToolCall, TaskRef  # noqa: E402
from slime_tau_plugin.engine.envs.tau1_data import scripted_v1_user  # noqa: E402
from slime_tau_plugin.engine.episode.result import TerminationReason

READ_PREFIXES = ("get_", "find_", "list_", "search_", "calculate", "think", "transfer_")
VARIANTS = (
    "gold",
    "gold_silent",
    "drop",
    "perturb",
    "int_to_float",
    "extra_write",
    "empty",
    "noise",
    "wrong_outputs",
    "transfer",
)
PLAN = {  # (domain, split): (number of tasks, variants per task)
    ("retail", "train"): (55, 1),
    ("retail", "test"): (115, 1),
    ("airline", "test"): (30, 1),
}
STOP_TEXT = "Thank you, that is all."

_backend = None


def _is_write(name: str) -> bool:
    return not name.startswith(READ_PREFIXES)


def _perturb_leaf(value: Any, rng: random.Random) -> Any:
    """A nearby but different value of the same JSON shape."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        if value and value[-1].isdigit():
            return value[:-1] + str((int(value[-1]) + 1) % 10)
        return value + "x"
    if isinstance(value, list) and value:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = _perturb_leaf(out[i], rng)
        return out
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        return {**value, key: _perturb_leaf(value[key], rng)}
    return "changed"


def _ints_to_floats(value: Any) -> tuple[Any, bool]:
    """Every int sent as a float (what an LLM often emits): equal under ``==``, different to v1's hash."""
    if isinstance(value, bool):
        return value, False
    if isinstance(value, int):
        return float(value), True
    if isinstance(value, list):
        pairs = [_ints_to_floats(v) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        pairs = {k: _ints_to_floats(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def make_plan(task: Any, variant: str, rng: random.Random, others: list[Any]) -> list[tuple[str, Any, Any]]:
    """An action sequence: ("tool", name, kwargs) | ("say", text, None) | ("stop", text, None)."""
    gold = [(a.name, copy.deepcopy(a.kwargs)) for a in task.actions]
    outputs = list(task.outputs)
    say = "Here is what I found: " + "; ".join(outputs) + "." if outputs else "All done."
    tools = list(gold)
    writes = [i for i, (name, _) in enumerate(tools) if _is_write(name)]
    candidates = writes or list(range(len(tools)))
    if variant == "drop" and tools:
        tools.pop(rng.choice(candidates))
    elif variant == "perturb" and tools:
        i = rng.choice(candidates)
        name, kwargs = tools[i]
        if kwargs:
            key = rng.choice(sorted(kwargs))
            tools[i] = (name, {**kwargs, key: _perturb_leaf(kwargs[key], rng)})
    elif variant == "int_to_float" and tools:
        changed = False
        for i in candidates:
            new_kwargs, changed = _ints_to_floats(tools[i][1])
            if changed:
                tools[i] = (tools[i][0], new_kwargs)
                break
        if not changed:
            return make_plan(task, "perturb", rng, others)
    elif variant == "extra_write":
        pool = [(a.name, copy.deepcopy(a.kwargs)) for t in others for a in t.actions if _is_write(a.name)]
        pool = [p for p in pool if not p[0].startswith("transfer")]
        if pool:
            extra = rng.choice(pool)
            end = next((i for i, (n, _) in enumerate(tools) if n.startswith("transfer")), len(tools))
            tools.insert(end, extra)
    elif variant == "empty":
        return [("stop", STOP_TEXT, None)]
    elif variant == "noise":
        tools.insert(rng.randrange(len(tools) + 1), ("no_such_tool", {"x": 1}))
        if tools:
            name = tools[0][0]
            tools.insert(rng.randrange(len(tools) + 1), (name, {"unexpected_argument": "1"}))
    elif variant == "wrong_outputs":
        say = "I could not find anything, sorry."
    plan: list[tuple[str, Any, Any]] = []
    said = variant == "gold_silent"
    for name, kwargs in tools:
        if name.startswith("transfer") and not said:
            plan.append(("say", say, None))
            said = True
        plan.append(("tool", name, kwargs))
    if variant == "transfer":
        if not said:
            plan.append(("say", say, None))
        plan.append(("tool", "transfer_to_human_agents", {"summary": "The user needs a human agent."}))
        return plan
    if not said:
        plan.append(("say", say, None))
    plan.append(("stop", STOP_TEXT, None))
    return plan


def run_v1_naive(domain: str, split: str, index: int, plan: list) -> tuple[float | None, list[str]]:
    """v1 as its own runner uses it: a fresh env, reset, step until done; the reward v1 returns."""
    from tau_bench.envs import get_env
    from tau_bench.types import Action

    env = get_env(domain, user_strategy="human", user_model="none", task_split=split, task_index=index)
    env.user = scripted_v1_user()
    env.reset(task_index=index)
    observations = []
    for kind, a, b in plan:
        if kind == "tool":
            res = env.step(Action(name=a, kwargs=copy.deepcopy(b)))
            observations.append(res.observation)
        else:
            env.user.stop_next = kind == "stop"
            res = env.step(Action(name="respond", kwargs={"content": a}))
        if res.done:
            return float(res.reward), observations
    return None, observations


def run_ours(backend: Any, ref: TaskRef, plan: list) -> tuple[float, float, list[str], dict]:
    session = backend.open(ref)
    observations, termination = [], TerminationReason.MAX_TURNS
    for i, (kind, a, b) in enumerate(plan):
        if kind == "tool":
            step = session.step(EnvToolCall(a, copy.deepcopy(b), f"call-{i}"))
            observations.append(step.content)
            if step.is_done:
                termination = TerminationReason.AGENT_STOP
                break
        else:
            session.record_message("assistant", a)
            if kind == "stop":
                termination = TerminationReason.USER_STOP
                break
            session.record_message("user", "Please go on.")
    fast = session.reward(termination)
    reference = session.reference_reward(termination)
    return fast.reward, reference.reward, observations, {**fast.breakdown, "loose_db_equal": _loose_db_equal(session)}


def _loose_db_equal(session: Any) -> bool:
    """What plain ``==`` on the databases says (type-blind: 50 == 50.0), to show why it is not used."""
    from slime_tau_plugin.engine.envs.tau1_data import gold_database

    live = {name: dict(table) for name, table in session.data.items()}
    return live == gold_database(session._domain, session._gold)


def _pristine_intact(backend: Any) -> bool:
    """The shared pristine databases still hash like freshly loaded ones (no episode wrote into them)."""
    from tau_bench.envs.base import consistent_hash, to_hashable

    for name in ("retail", "airline"):
        fresh = backend.v1_env(name, backend.splits(name)[0]).data
        if consistent_hash(to_hashable(backend.domain(name).pristine)) != consistent_hash(to_hashable(fresh)):
            return False
    return True


def run_chunk(jobs: list[tuple[str, str, int, str, int]]) -> tuple[list[dict], bool]:
    """Worker: play each (domain, split, index, variant, seed) both ways."""
    global _backend
    if _backend is None:
        from slime_tau_plugin.engine.envs.tau1 import Tau1Backend

        _backend = Tau1Backend()
    out = []
    for domain, split, index, variant, seed in jobs:
        rng = random.Random(seed)
        tasks = _backend.tasks(domain, split)
        others = rng.sample(tasks, 5)
        plan = make_plan(tasks[index], variant, rng, others)
        v1_reward, v1_obs = run_v1_naive(domain, split, index, plan)
        fast, reference, obs, breakdown = run_ours(_backend, TaskRef("tau1", domain, split, str(index)), plan)
        out.append(
            {
                "job": (domain, split, index, variant),
                "v1": v1_reward,
                "fast": fast,
                "reference": reference,
                "obs_match": obs == v1_obs,
                "breakdown": breakdown,
            }
        )
    return out, _pristine_intact(_backend)


def jobs() -> list[tuple[str, str, int, str, int]]:
    out = []
    k = 0
    for (domain, split), (n_tasks, per_task) in PLAN.items():
        for index in range(n_tasks):
            for _ in range(per_task):
                out.append((domain, split, index, VARIANTS[k % len(VARIANTS)], 1000 + k))
                k += 1
    return out


def test_reward_parity_with_v1() -> None:
    all_jobs = jobs()
    workers = max(1, min(os.cpu_count() or 1, 8))
    chunks = [all_jobs[i::workers] for i in range(workers)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = list(pool.map(run_chunk, chunks))
    elapsed = time.perf_counter() - t0
    results = [r for part, _ in parts for r in part]
    assert all(intact for _, intact in parts), "an episode wrote into the shared pristine database"
    assert len(results) >= 200
    unfinished = [r["job"] for r in results if r["v1"] is None]
    assert not unfinished, f"v1 episodes that never ended: {unfinished[:5]}"
    mismatches = [r for r in results if not (r["fast"] == r["reference"] == r["v1"])]
    assert not mismatches, f"{len(mismatches)} reward mismatches, e.g. {mismatches[:3]}"
    bad_obs = [r["job"] for r in results if not r["obs_match"]]
    assert not bad_obs, f"tool observations differ from v1's: {bad_obs[:5]}"
    ones = sum(r["v1"] == 1.0 for r in results)
    zeros = sum(r["v1"] == 0.0 for r in results)
    assert ones >= 50 and zeros >= 50, (ones, zeros)
    # Episodes where dict equality would have said "same database" but v1's hash (and ours) does not.
    type_only = sum(r["breakdown"].get("db_match") is False and r["breakdown"]["loose_db_equal"] for r in results)
    assert type_only >= 1
    print(
        f"\n{len(results)} episodes, {ones} reward 1, {zeros} reward 0, 0 mismatches, {type_only} where dict == "
        f"would be wrong, {elapsed:.1f}s with {workers} workers"
    )
