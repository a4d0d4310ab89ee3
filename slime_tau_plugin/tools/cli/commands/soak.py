"""``slime-tau soak``: thousands of episodes through ``generate`` with faults and outages; did slime lose any?

The oracle policy (``slime-tau serve``) and the scripted LLM user (``slime-tau serve-user``) run in their
own processes with faults drawn at ``--fault-rate`` (spread over ``--kinds``); env faults go through
``TAU_FAULTS`` in this process; ``--outage user:30s@60s`` kills the user server 60 s after it first answered an
episode and starts it again 30 s later. Exit 0 when no exception escaped ``generate``, no sample is misaligned and
none was lost; 1 otherwise (or when a server does not start); 2 for a bad flag. The work is in
``slime_tau_plugin/tools/soak/``.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.args import HelpFormatter, non_negative_float, positive_float, positive_int, share

DEFAULT_TOKENIZER = ".cache/tokenizers/qwen2_5"
"""Fetched by ``scripts/fetch_test_tokenizers.sh``; relative to the working directory, else to the checkout."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "soak",
        help="fault-injection soak: many episodes through generate, faults, outages, memory",
        description="Play many τ² episodes through generate (slime's entry point) against the oracle policy and "
        "the scripted LLM user, each in its own process, with injected faults and server outages; report what "
        "slime would have lost. Exit 0 when no exception escaped, no sample is misaligned and none was lost.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--episodes", type=positive_int, required=True, metavar="N", help="episodes to play")
    p.add_argument("--concurrency", type=positive_int, default=128, metavar="C", help="generate calls at once")
    p.add_argument(
        "--fault-rate",
        type=share,
        default=0.0,
        metavar="R",
        help="chance that a request or env call meets a fault, spread evenly over the kinds of each target",
    )
    p.add_argument(
        "--kinds",
        default=None,
        help="comma list of [target.]kind[=param] to inject (faults.py's kinds, e.g. reset,http_503,"
        "user.empty_reply,slow=3) (default: every policy, user and env kind)",
    )
    p.add_argument(
        "--outage",
        action="append",
        default=[],
        type=_outage,
        metavar="TARGET:DURATION@AT",
        help="kill the user (or policy) server AT after it first answered an episode and restart it DURATION "
        "later, e.g. user:30s@60s (repeatable) (default: none)",
    )
    p.add_argument("--seed", type=int, default=None, metavar="S", help="seed of the fault draws (default: random)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the report as JSON (default: none)")
    p.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, help="tokenizer directory (policy and plugin)")
    p.add_argument("--domain", default="retail", help="τ² domain; the soak cycles over its tasks")
    p.add_argument("--split", default="train", help="τ² split")
    p.add_argument("--outage-tolerance-s", type=non_negative_float, default=300.0, help="tau_outage_tolerance_s")
    p.add_argument(
        "--request-timeout-s",
        type=positive_float,
        default=15.0,
        help="policy, user and env call timeouts; 'slow' faults answer 2 s after it",
    )
    p.add_argument("--user-latency-ms", type=non_negative_float, default=0.0, help="added to each user answer")
    p.add_argument("--policy-latency-ms", type=non_negative_float, default=0.0, help="added to each /generate")
    p.add_argument("--max-replies", type=positive_int, default=2, help="user confirmations before ###STOP###")
    p.add_argument("--user-max-inflight", type=positive_int, default=64, help="tau_user_max_inflight")
    p.add_argument(
        "--policy-max-inflight", type=positive_int, default=None, help="tau_policy_max_inflight (default: unbounded)"
    )
    p.add_argument(
        "--episode-timeout-s", type=positive_float, default=None, help="tau_episode_timeout_s (default: none)"
    )
    p.add_argument(
        "--sample-timeout-s",
        type=positive_float,
        default=1800.0,
        help="a generate that has not returned after this long is cancelled and counted lost",
    )


def _outage(text: str):
    from slime_tau_plugin.tools.soak.plan import outage

    return outage(text)


def run(ns: argparse.Namespace) -> int:
    from slime_tau_plugin.tools.soak.children import ServerStartError
    from slime_tau_plugin.tools.soak.driver import run_soak
    from slime_tau_plugin.tools.soak.plan import SoakSettings, default_kinds, parse_kinds

    tokenizer = Path(ns.tokenizer)
    checkout = Path(__file__).resolve().parents[2]
    if not tokenizer.is_absolute() and not tokenizer.exists() and (checkout / tokenizer).exists():
        tokenizer = checkout / tokenizer
    if not (tokenizer / "tokenizer_config.json").is_file():
        hint = " (fetch it: bash scripts/fetch_test_tokenizers.sh)" if ns.tokenizer == DEFAULT_TOKENIZER else ""
        raise ConfigError(
            f"--tokenizer {ns.tokenizer}: no tokenizer_config.json there{hint}; pass a tokenizer directory"
        )
    kinds = parse_kinds(ns.kinds) if ns.kinds is not None else default_kinds(ns.request_timeout_s)
    settings = SoakSettings(
        episodes=ns.episodes,
        concurrency=ns.concurrency,
        fault_rate=ns.fault_rate,
        kinds=kinds,
        outages=tuple(ns.outage),
        seed=ns.seed,
        tokenizer=str(tokenizer.resolve()),
        domain=ns.domain,
        split=ns.split,
        outage_tolerance_s=ns.outage_tolerance_s,
        request_timeout_s=ns.request_timeout_s,
        user_latency_ms=ns.user_latency_ms,
        policy_latency_ms=ns.policy_latency_ms,
        max_replies=ns.max_replies,
        user_max_inflight=ns.user_max_inflight,
        policy_max_inflight=ns.policy_max_inflight,
        episode_timeout_s=ns.episode_timeout_s,
        sample_timeout_s=ns.sample_timeout_s,
        json_path=ns.json,
    )
    command = shlex.join(ns.argv)
    try:
        report = asyncio.run(run_soak(settings, command))
    except ServerStartError as exc:
        print(f"slime-tau soak: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(report.to_text(), flush=True)
    if ns.json:
        Path(ns.json).write_text(report.to_json() + "\n")
    return 0 if report.passed else 1
