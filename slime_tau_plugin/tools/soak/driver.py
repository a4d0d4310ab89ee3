"""The soak itself: servers up, ``concurrency`` workers calling ``generate`` on one loop, every sample checked.

This is slime's side of the contract, played for thousands of episodes: slime-like ``args`` (a
``SimpleNamespace`` of ``tau_*`` keys and slime's own), a strict ``Sample`` per episode, the LLM user,
faults on every endpoint and outages of whole server processes. Each sample is checked and dropped as soon
as it returns (the soak measures the plugin's memory, not its own). A ``generate`` that has not returned
after ``sample_timeout_s`` is cancelled and counted lost; one that raises is counted as an escaped exception.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.data import task_row
from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.net import endpoints
from slime_tau_plugin.tools.faults.env import install_env_faults
from slime_tau_plugin.tools.faults.spec import FaultInjector, FaultSpec
from slime_tau_plugin.tools.soak.checks import alignment_problem, is_lost
from slime_tau_plugin.tools.soak.children import ServerProcess, policy_server, user_server
from slime_tau_plugin.tools.soak.monitor import LoopWatchdog, rss_mb
from slime_tau_plugin.tools.soak.plan import Outage, SoakSettings
from slime_tau_plugin.tools.soak.report import SoakReport
from slime_tau_plugin.tools.soak.strict_sample import sample_class

logger = logging.getLogger(__name__)

SAMPLING = {
    "temperature": 1.0,
    "top_p": 1.0,
    "max_new_tokens": 2048,
    "no_stop_trim": True,
    "skip_special_tokens": False,
}
"""What slime's rollout passes to ``generate`` (``--rollout-max-response-len 2048``)."""
RSS_EVERY = 1000
_IDS = re.compile(r"\b[0-9a-f]{8,}\b|\d+(\.\d+)?")


def slime_args(settings: SoakSettings, policy_url: str, user_base_url: str) -> SimpleNamespace:
    """The ``args`` slime would pass: its own keys plus the ``tau_*`` keys of a custom-config YAML."""
    timeout = settings.request_timeout_s
    return SimpleNamespace(
        hf_checkpoint=settings.tokenizer,
        rollout_max_context_len=32768,
        rollout_max_response_len=None,
        partial_rollout=False,
        tau_policy_url=policy_url,
        tau_tokenizer_path=settings.tokenizer,
        tau_benchmark="tau2",
        tau_domain=settings.domain,
        tau_split=settings.split,
        tau_user="llm",
        tau_user_base_url=user_base_url,
        tau_user_model="scripted-user",
        tau_user_timeout_s=timeout,
        tau_policy_timeout_s=timeout,
        tau_env_timeout_s=timeout,
        tau_outage_tolerance_s=settings.outage_tolerance_s,
        tau_user_max_inflight=settings.user_max_inflight,
        tau_policy_max_inflight=settings.policy_max_inflight,
        tau_episode_timeout_s=settings.episode_timeout_s,
    )


async def run_soak(settings: SoakSettings, command: str) -> SoakReport:
    """Run the whole soak and return its report (the servers are stopped on return, whatever happened).

    Raises:
        ServerStartError: a server did not come up.
    """
    cls, cls_name = sample_class()
    report = SoakReport(command=command, sample_class=cls_name, episodes_requested=settings.episodes)
    report.concurrency, report.fault_specs = settings.concurrency, settings.fault_specs()
    env_faults = _arm_env_faults(report.fault_specs["env"], settings.seed)
    log_dir = Path(tempfile.mkdtemp(prefix="slime-tau-soak-"))
    common = {"log_dir": log_dir, "seed": settings.seed}
    servers = {
        "policy": policy_server(
            settings.tokenizer,
            report.fault_specs["policy"],
            domain=settings.domain,
            split=settings.split,
            latency_ms=settings.policy_latency_ms,
            **common,
        ),
        "user": user_server(
            report.fault_specs["user"],
            latency_ms=settings.user_latency_ms,
            max_replies=settings.max_replies,
            **common,
        ),
    }
    try:
        for server in servers.values():
            server.start()
        await asyncio.gather(*(asyncio.to_thread(s.wait_healthy) for s in servers.values()))
        print(f"soak: servers up (logs in {log_dir})", file=sys.stderr, flush=True)
        refs = await asyncio.to_thread(_task_refs, settings.domain, settings.split)
        args = slime_args(settings, servers["policy"].url, servers["user"].url + "/v1")
        # both answered their health check: an outage from now on is waited for, even one that starts before an
        # episode's first request succeeds (the CLI's pre-flight does the same)
        endpoints.note_answered(endpoints.EndpointRole.POLICY, args.tau_policy_url)
        endpoints.note_answered(endpoints.EndpointRole.USER, args.tau_user_base_url)
        await _play(settings, report, args, refs, cls, servers)
    finally:
        report.faults_injected = await asyncio.to_thread(_fault_counts, servers, env_faults)
        report.server_rss_mb = {name: s.rss_mb() for name, s in servers.items()}
        report.breaker_openings = endpoints.breaker_openings()
        report.rss_mb_end = rss_mb()
        for server in servers.values():
            await asyncio.to_thread(server.kill)
    return report


async def _play(
    settings: SoakSettings, report: SoakReport, args: Any, refs: list, cls: type, servers: dict[str, ServerProcess]
) -> None:
    report.rss_mb_start = rss_mb()
    watchdog = LoopWatchdog()
    watchdog.start()
    t0 = time.monotonic()
    roles = endpoints.EndpointRole
    endpoint = {"user": (roles.USER, args.tau_user_base_url), "policy": (roles.POLICY, args.tau_policy_url)}
    outages = [
        asyncio.create_task(_outage(o, servers[o.target], endpoint[o.target], t0, report)) for o in settings.outages
    ]
    next_index = iter(range(settings.episodes))
    progress_every = max(1, settings.episodes // 10)

    async def worker() -> None:
        for i in next_index:  # one shared iterator: each index is taken once, by whichever worker is free
            ref = refs[i % len(refs)]
            row = task_row(i % len(refs), ref)
            sample = cls(prompt=row["index"], metadata=row["metadata"], session_id=f"soak-{i}")
            sample.index = sample.group_index = i
            await _one(settings, report, args, sample)
            if report.episodes % progress_every == 0:
                _progress(report, time.monotonic() - t0, watchdog)

    try:
        await asyncio.gather(*(worker() for _ in range(settings.concurrency)))
    finally:
        report.wall_s = time.monotonic() - t0
        for task in outages:
            task.cancel()
        await asyncio.gather(*outages, return_exceptions=True)
        await watchdog.stop()
        report.loop_worst_stall_s, report.loop_worst_stall_at_s = watchdog.worst_s, watchdog.worst_at_s
        report.loop_stalls_over_100ms = watchdog.stalls_over_100ms


async def _one(settings: SoakSettings, report: SoakReport, args: Any, sample: Any) -> None:
    """One ``generate``, bounded by ``sample_timeout_s``; its sample checked and counted."""
    task = asyncio.create_task(generate(args, sample, dict(SAMPLING)))
    done, _ = await asyncio.wait({task}, timeout=settings.sample_timeout_s)
    report.episodes += 1
    if not done:
        task.cancel()
        report.lost += 1
        logger.error("soak: generate for sample %s did not return in %gs", sample.index, settings.sample_timeout_s)
    elif task.cancelled():
        report.note_exception(asyncio.CancelledError("generate was cancelled from inside"))
    elif task.exception() is not None:
        report.note_exception(task.exception())
    elif is_lost(sample):
        report.lost += 1
    else:
        _count(report, sample)
    if report.episodes % RSS_EVERY == 0:
        now_mb = rss_mb()
        report.rss_mb_by_episode[report.episodes] = now_mb or 0.0
        if report.episodes == 1000:
            report.rss_mb_at_1000 = now_mb


def _count(report: SoakReport, sample: Any) -> None:
    problem = alignment_problem(sample)
    if problem is not None:
        report.note_misaligned(problem, sample.index)
    meta = sample.metadata or {}
    report.statuses[sample.status.name] += 1
    report.termination_reasons[str(meta.get("termination_reason"))] += 1
    report.retries += int(meta.get("net_retries") or 0)
    report.outage_wait_s += float(meta.get("outage_wait_s") or 0.0)
    report.slot_wait_s += float(meta.get("slot_wait_s") or 0.0)
    if sample.status.name == "FAILED":
        report.failed_errors[_IDS.sub("N", str(meta.get("error")))[:110]] += 1


async def _outage(
    outage: Outage, server: ServerProcess, endpoint: tuple[endpoints.EndpointRole, str], t0: float, report: SoakReport
) -> None:
    """Kill ``server`` ``at_s`` after it first answered an episode, start it again on the same port ``duration_s``
    later. Counted from that answer, not from ``t0``: on a busy box the first episodes build their resources for
    10-20 s, and an outage "2 s in" would be over before any episode talked to the server."""
    while endpoints.endpoint_registry().answers(*endpoint) == 0:
        await asyncio.sleep(0.05)
    await asyncio.sleep(outage.at_s)
    await asyncio.to_thread(server.kill)
    killed = time.monotonic() - t0
    line = f"{outage}: {server.name} killed at {killed:.1f}s"
    report.outages.append(line + " (the run ended before the restart)")
    await asyncio.sleep(outage.duration_s)
    await asyncio.to_thread(server.start)
    await asyncio.to_thread(server.wait_healthy)
    report.outages[-1] = f"{line}, answering again at {time.monotonic() - t0:.1f}s"


def _task_refs(domain: str, split: str) -> list:
    """The split's tasks; off the loop, τ's import alone takes seconds."""
    return get_backend("tau2").task_refs(domain, split)


def _arm_env_faults(spec: str, seed: int | None) -> FaultInjector | None:
    """Install the env faults in this process (``faults/env.py``) before any episode; an empty spec, none."""
    return install_env_faults(FaultSpec.parse(spec, seed=seed, source="--kinds") if spec else None)


def _fault_counts(servers: dict[str, ServerProcess], env: FaultInjector | None) -> dict[str, int]:
    counts = {f"{name}.{kind}": n for name, s in servers.items() for kind, n in s.fault_counts().items()}
    counts.update({f"env.{kind}": n for kind, n in (env.counts() if env is not None else {}).items()})
    return counts


def _progress(report: SoakReport, elapsed_s: float, watchdog: LoopWatchdog) -> None:
    rate = report.episodes / elapsed_s if elapsed_s > 0 else 0.0
    print(
        f"soak: {report.episodes}/{report.episodes_requested} episodes, {elapsed_s:.0f}s, {rate:.2f}/s, "
        f"RSS {rss_mb() or 0:.0f} MB, worst loop stall {watchdog.worst_s * 1000:.0f} ms",
        file=sys.stderr,
        flush=True,
    )
