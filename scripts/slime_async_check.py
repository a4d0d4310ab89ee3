"""slime's fully-async rollout (``slime.rollout.fully_async_rollout``) with our generate: exact when healthy,
stopped naming the endpoint when the user simulator is dead.

Each step does what slime's ``RolloutManager.generate`` does: the rollout function, then the reward
post-process the launch scripts name (``advantages.post_process_rewards``; slime runs no dynamic filter in this
mode, so that hook is where the failure guard sees every group). ``--user scripted``: every kept sample must
equal its uninterrupted episode (``slime_partial_check.check``). ``--user dead``: ``tau_user: llm`` on a closed
port; the run must stop with a ``FailureGuardError`` naming the user simulator within ``--limit-s``.
Weights are pushed as ``train_async.py`` does (after every step but the first: ``slime_lag.push``) and each step's
trainable ids are reported by weight lag against the weights that train them (``weight_lag.lag_metrics``), with
the episodes slime aborted (thrown away or suspended) per step.

Setup and PYTHONPATH: as ``slime_loop_check.py``. Exit 0 when the mode's check holds.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

import slime_lag
import slime_loop_check as loop
import slime_loop_faults as faults
import slime_partial_check as partial


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--n-train-groups", type=int, default=4)
    p.add_argument("--n-samples-per-prompt", type=int, default=2)
    p.add_argument("--latency-ms", type=int, default=50)
    p.add_argument("--user", choices=("scripted", "dead"), default="scripted")
    p.add_argument("--partial", action="store_true", help="also --partial-rollout")
    p.add_argument("--limit-s", type=float, default=120.0, help="--user dead: the run must stop within this")
    p.add_argument("--max-weight-lag", type=int, default=None, help="tau_max_weight_lag")
    ns = p.parse_args()
    ns.extra_groups, ns.max_response_len, ns.max_tokens_per_gpu, ns.max_context_len = 0, 4096, 16384, 16384
    ns.filter, ns.user_fail_share, ns.user_wrong_share = "none", 0.0, 0.0
    ns.extra_flags = (
        f"--num-rollout {ns.steps} --sglang-server-concurrency 16 "
        "--rollout-function-path slime.rollout.fully_async_rollout.generate_rollout_fully_async "
        "--custom-reward-post-process-path slime_tau_plugin.adapters.slime.advantages.post_process_rewards"
        + (" --partial-rollout" if ns.partial else "")
    )
    return ns


def main() -> int:
    ns = parse()
    slime = loop.slime_api("init_http_client", "load_function", setup="see slime_loop_check.py for the set-up")
    if slime is None:
        return 2
    from slime_tau_plugin.adapters.slime.group_filter import FailureGuardError
    from slime_tau_plugin.adapters.slime.partial import abort_tally

    logging.basicConfig(level=logging.WARNING, force=True)
    tok, failures, user = loop.tokenizer_dir(), [], None
    with tempfile.TemporaryDirectory(prefix="slime-async-") as tmp_name:
        tmp = Path(tmp_name)
        server, url = loop.start_server(tok, ns.latency_ms, tmp / "server.log")
        t0 = time.monotonic()
        try:
            train, eval_yaml = loop.prepare(tmp, ["tau2/retail/test"])
            user, user_url = faults.start_user(ns.user, 0.0, 0.0)
            (tau_yaml := tmp / "tau.yaml").write_text(
                slime_lag.with_max_lag(faults.user_yaml(loop.TAU_YAML, user_url), ns.max_weight_lag)
            )
            args = loop.build_args(ns, tok, url, train, eval_yaml, tau_yaml)
            slime.init_http_client(args)
            data_source = slime.load_function(args.data_source_path)(args)
            rollout = slime.load_function(args.rollout_function_path)
            post_process = slime.load_function(args.custom_reward_post_process_path)
            lags = slime_lag.LagLog(ns.max_weight_lag)
            slime_lag.push(url, 1)  # train_async.py pushes the weights before the first rollout
            t0 = time.monotonic()
            for step in range(ns.steps):
                groups = rollout(args, step, data_source)
                flat = [s for group in groups for s in group]
                lags.step(step, flat)  # the log hook runs before the reward post-process
                post_process(args, flat)  # what RolloutManager._post_process_rewards calls
                if step >= 1:  # rollout step + 1 was drawn while step trained; the push waited for it
                    slime_lag.push(url, step + 1)
                statuses = sorted({s.status.name for s in flat})
                took, tally = time.monotonic() - t0, abort_tally().take()
                aborted = f"aborted: {tally['partial/aborted_suspended']:.0f} suspended, "
                aborted += f"{tally['partial/aborted_thrown_away']:.0f} thrown away "
                aborted += f"({tally['partial/aborted_thrown_away_turns']:.0f} turns)"
                turns = sum(s.metadata.get("num_turns", 0) for s in flat)
                print(f"step {step}: {len(groups)} groups, {len(flat)} samples {statuses}, {turns} turns, ", end="")
                print(f"{aborted}, {took:.1f} s")
                if ns.user == "scripted":
                    fulls = asyncio.run(partial.uninterrupted(args, flat))
                    failures += [
                        f"step {step} sample {s.index}: {why}"
                        for s, full in zip(flat, fulls, strict=True)
                        if (why := partial.check(s, full, step, masked=ns.max_weight_lag is not None)) is not None
                    ]
            if ns.user == "dead":
                failures.append(f"the run did not stop in {ns.steps} steps ({time.monotonic() - t0:.1f} s)")
        except FailureGuardError as exc:
            took = time.monotonic() - t0
            print(f"stopped after {took:.1f} s: {exc}")
            if ns.user != "dead" or exc.endpoint != "user" or took > ns.limit_s:
                failures.append(f"unexpected stop ({exc.endpoint}, {took:.1f} s)")
        finally:
            _stop_worker()
            loop.stop_started(server, user)
    if ns.user == "scripted":
        print(f"\ntrainable ids by weight lag when trained (train_async.py: one push per step)\n{lags.report()}")
    print("\n".join(failures[:20]) or f"PASS ({ns.user} user)")
    return 1 if failures else 0


def _stop_worker() -> None:
    """slime's worker thread outlives the rollout call (``atexit`` stops it); stop it before the server goes."""
    module = sys.modules.get("slime.rollout.fully_async_rollout")
    if module is not None:
        module._stop_global_worker()


if __name__ == "__main__":
    sys.exit(main())
