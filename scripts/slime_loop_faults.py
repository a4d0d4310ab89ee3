"""Failure modes for ``slime_loop_check.py``: a dead or flaky user simulator, a dynamic filter, a capped rollout.

Kept apart so the check's default path reads as before. slime loads :func:`counted_filter` by dotted path
(``slime_loop_faults.counted_filter``: the script's folder is on ``sys.path``); it counts each group's verdict
and forwards to the filter under test (:data:`FILTERS`). Nothing here is imported by the package.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import random
import re
import socket
import time
from statistics import mean
from types import SimpleNamespace
from typing import Any

FILTERS = {
    "slime": "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std",
    "tau": "slime_tau_plugin.adapters.slime.group_filter.keep_group",
    "slime-fallback": "slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std_with_fallback",
}
ALL_SAMPLES = "slime_tau_plugin.adapters.slime.all_samples.process_all_samples"
verdicts: collections.Counter = collections.Counter()
marks: dict[str, Any] = {}
_target: list = []


def counted_filter(args: Any, samples: list, **kwargs: Any) -> Any:
    """slime's dynamic filter here: count the verdict, forward to the filter under test."""
    verdicts["groups finished"] += 1
    try:
        out = _target[0](args, samples, **kwargs)
    except Exception as exc:
        marks["raised_at"], marks["raised"] = time.monotonic(), f"{type(exc).__name__}: {exc}"
        raise
    keep, reason = bool(getattr(out, "keep", out)), getattr(out, "reason", None)
    short = not keep and getattr(out, "keep_when_insufficient", False)  # slime keeps it if too few are left
    verdicts["kept" if keep else f"rejected {reason} (keep when insufficient)" if short else f"dropped {reason}"] += 1
    if keep and any(s.status.name == "FAILED" for s in samples):
        verdicts["kept with a FAILED episode"] += 1
    return out


def filter_flags(name: str) -> str:
    """slime flags for ``--filter``: our counting wrapper around the chosen filter (+ all_samples for ``tau``)."""
    if name == "none":
        return ""
    from slime.utils.misc import load_function

    _target[:] = [load_function(FILTERS[name])]
    extra = f" --rollout-all-samples-process-path {ALL_SAMPLES}" if name == "tau" else ""
    return f"--dynamic-sampling-filter-path slime_loop_faults.counted_filter{extra}"


class LogTally(logging.Handler):
    """Counts WARNING+ records by logger and keeps their lines: what the run logged while it looped."""

    def __init__(self, level: int = logging.WARNING, width: int = 300) -> None:
        super().__init__(level)
        self.width = width
        self.by_logger: collections.Counter = collections.Counter()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.by_logger[f"{record.levelname} {record.name}"] += 1
        self.lines.append(" ".join(f"{record.levelname} {record.name}: {record.getMessage()}".split())[: self.width])


def start_user(kind: str, fail_share: float, wrong_share: float) -> tuple[Any, str | None]:
    """(server to stop or None, tau_user_base_url or None for the scripted user)."""
    if kind == "scripted":
        return None, None
    if kind == "dead":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return None, f"http://127.0.0.1:{port}/v1"  # closed once the socket is: connection refused
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply

    rng = random.Random(0)

    def reply(messages: list[dict], tools: list[dict] | None) -> dict:
        opening = not any(m.get("role") == "assistant" and m.get("content") for m in messages)
        if opening and rng.random() < wrong_share:  # the oracle cannot place it: a reward-0 episode
            return {"role": "assistant", "content": "Hi, I need help with my account."}
        return scripted_user_reply(messages, tools, 0)

    class FlakyUser(ChatUserServer):
        def complete(self, body: Any, headers: dict[str, str]) -> Any:
            if rng.random() < fail_share:
                return 503, {"error": {"message": "injected outage"}}
            return super().complete(body, headers)

    server = FlakyUser(reply=reply).start()
    return server, server.base_url


def with_workers(tau_yaml: str, workers: int) -> str:
    """The plugin config with ``tau_episode_workers: workers`` (0 leaves it as it is: in slime's process)."""
    return tau_yaml if not workers else tau_yaml.replace("}", f", tau_episode_workers: {workers}}}")


def break_workers() -> None:
    """Every episode worker process started from now on dies before it answers (its interpreter finds no stdlib)."""
    os.environ["PYTHONHOME"] = "/nonexistent"


def user_yaml(tau_yaml: str, user_url: str | None) -> str:
    if user_url is None:
        return tau_yaml
    llm = f"tau_user: llm, tau_user_base_url: '{user_url}', tau_user_model: scripted-user, tau_user_timeout_s: 10"
    return tau_yaml.replace("tau_user: scripted", llm)


def run_capped(coro: Any, args: Any, timeout_s: float | None) -> tuple[Any, str, float]:
    """Run slime's rollout on its loop thread for at most ``timeout_s``: (output or None, how it ended, when)."""
    from slime.rollout.sglang_rollout import GenerateState
    from slime.utils.async_utils import get_async_loop

    loop = get_async_loop().loop
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout_s), "returned", time.monotonic()
    except concurrent.futures.TimeoutError:
        future.cancel()
        how = "still looping at the cap"
    except Exception as exc:
        how = f"raised {type(exc).__name__}"
    ended = time.monotonic()
    state = GenerateState(args)
    loop.call_soon_threadsafe(lambda: [task.cancel() for task in list(state.pendings)])
    time.sleep(1.0)
    return None, how, ended


def advantage_report(args: Any, groups: list[list[Any]]) -> str:
    """For kept groups with a FAILED episode: mean advantage of their successes, slime's vs ours."""
    from slime.ray import rollout

    from slime_tau_plugin.adapters.slime.advantages import post_process_rewards

    flat = [s for g in groups for s in g]
    manager_cls = getattr(rollout.RolloutManager, "__ray_actor_class__", rollout.RolloutManager)
    _, slime_adv = manager_cls._post_process_rewards(
        SimpleNamespace(args=args, custom_reward_post_process_func=None), flat
    )
    _, ours = post_process_rewards(args, flat)
    n = args.n_samples_per_prompt
    picked = [
        i
        for g in range(len(groups))
        if any(s.status.name == "FAILED" for s in groups[g])
        for i in range(g * n, (g + 1) * n)
        if flat[i].status.name != "FAILED" and float(flat[i].reward) >= 1.0
    ]
    if not picked:
        return "advantages: no kept group has both a FAILED episode and a success"
    return (
        f"advantages of the {len(picked)} successes in kept groups with a FAILED episode: slime mean "
        f"{mean(slime_adv[i] for i in picked):.3f}, ours {mean(ours[i] for i in picked):.3f}; "
        f"FAILED episodes: slime {mean(slime_adv[i] for i in range(len(flat)) if flat[i].status.name == 'FAILED'):.3f}"
        ", ours 0"
    )


def report(
    ns: Any, args: Any, how: str, took: float, out: Any, tally: LogTally, submitted: int, all_samples_lines: list[str]
) -> int:
    """Print what the failure run did; exit status 0 when it ended as its mode should."""
    k = args.n_samples_per_prompt
    workers = f", {ns.episode_workers} episode workers" + (" (broken)" if ns.broken_workers else "")
    batch = args.rollout_batch_size
    print(f"\nmode: --user {ns.user} --filter {ns.filter}{workers}, {k} samples/prompt, rollout batch {batch}")
    ended = f"{how} after {took:.1f} s" + (f": {marks['raised']}" if "raised" in marks else "")
    print(f"train rollout {ended}")
    print(f"groups submitted {submitted} ({submitted * k} episodes); filter verdicts: {dict(verdicts)}")
    print(f"WARNING+ records by logger: {dict(tally.by_logger)}")
    for line in tally.lines[:2] + (["..."] if len(tally.lines) > 3 else []) + tally.lines[-1:]:
        print(f"  {line}")
    if out is not None:
        print(advantage_report(args, out.samples))
    watched = r"'(rollout/tau_all/\S*(?:reward_mean|pass_rate|status/failed|failed/\w+|groups/\S+))': ([-0-9.e]+)"
    for line in all_samples_lines:
        print("all_samples hook logged: " + ", ".join(f"{k} {float(v):g}" for k, v in re.findall(watched, line)))
    if ns.user == "dead":
        return 0 if "raised" in marks and "user simulator" in marks["raised"] else 1
    if ns.broken_workers:
        return 0 if "raised" in marks and "FailureGuardError" in marks["raised"] and "worker" in marks["raised"] else 1
    return 0 if how == "returned" else 1
