"""Pass rates pinned at 0 inside slime's OWN rollout loop: does a step end, after how many redraws (issue 44)?

Drives slime's ``generate_rollout_async`` the way ``slime_loop_check.py`` does (its server, its slime args, our
``generate``) for ``--steps`` rollout steps, with the built-in ``echo`` policy (it never solves a task: every reward
0, no group has spread; ``--pin 1``: the oracle, every reward 1). Each step sets slime's rollout id and then runs
the rollout log hook as ``RolloutManager.generate`` does. Per step it prints the over-sampling batches slime drew
(``data_source.get_samples`` calls) and how many of them were redraws, the filter's verdicts, the groups slime kept
and how many of those are short of spread (marked ``short_<reason>``), slime's own drop counts and what the log hook
logged under ``rollout/tau/redraw/``. ``--filter``: ``tau`` (``group_filter.keep_group`` with
``tau_max_redraws``, default 1), ``slime`` (``check_reward_nonzero_std``: no bound, the step is capped at
``--timeout-s``) or ``slime-fallback`` (``check_reward_nonzero_std_with_fallback``). Exit 0 when every step of the
``tau`` filter returns a full batch with at most ``tau_max_redraws`` redraws, the hook's numbers equal the count,
and the bound's line was logged; for ``slime``, when the step is still drawing at the cap. 2 without slime.

    PYTHONPATH=$PWD:/work/wt/slime-scratch /work/wt/slime-venv/bin/python scripts/slime_loop_redraw.py \\
        [--filter tau|slime|slime-fallback] [--max-redraws N] [--pin 0|1] [--steps 2]
"""

from __future__ import annotations

import argparse
import collections
import logging
import math
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import slime_loop_check as loop
import slime_loop_faults as faults

BOUND_LINE = "tau redraw bound"


def step_report(
    args: Any, step: int, batches: int, out: Any, how: str, took: float, logged: dict, bounded: bool
) -> list[str]:
    """Print one step; returns what failed (empty: the step ended as the bound says; ``bounded``: our filter)."""
    t, o = args.rollout_batch_size, args.over_sampling_batch_size
    redraws = batches - math.ceil(t / o)
    groups = out.samples if out is not None else []
    marks = collections.Counter((g[0].metadata or {}).get("tau_group_filter", "-") for g in groups)
    short = sum(c for m, c in marks.items() if str(m).startswith("short_"))
    print(
        f"step {step}: {how} after {took:.1f} s; batches drawn {batches} of {o} groups (redraws {redraws}); "
        f"kept {len(groups)} of {t} groups, {short} short of spread; marks {dict(marks)}"
    )
    print(f"  filter verdicts {dict(faults.verdicts)}; slime's metrics {out.metrics if out is not None else None}")
    print(f"  log hook rollout/tau/redraw/*: {logged}")
    if not bounded:
        return []
    limit = args.tau_max_redraws if getattr(args, "tau_max_redraws", None) is not None else 1
    bad = []
    if out is None or len(groups) != t:
        bad.append(f"step {step} did not return {t} groups ({how})")
    if redraws > limit:
        bad.append(f"step {step} drew {redraws} redraws, more than tau_max_redraws={limit}")
    if logged.get("redraws") != redraws or logged.get("kept_short") != short:
        bad.append(f"step {step}: the log hook says {logged}, the loop drew {redraws} redraws and kept {short} short")
    return bad


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--filter", choices=tuple(faults.FILTERS), default="tau")
    p.add_argument("--max-redraws", type=int, default=None, help="tau_max_redraws (unset: the default, 1)")
    p.add_argument("--pin", type=int, choices=(0, 1), default=0, help="the pass rate: 0 (echo) or 1 (oracle)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--n-train-groups", type=int, default=4, help="slime --rollout-batch-size")
    p.add_argument("--extra-groups", type=int, default=4, help="over-sampling: batch = n-train-groups + this")
    p.add_argument("--n-samples-per-prompt", type=int, default=2)
    p.add_argument("--timeout-s", type=float, default=120, help="cap on each step (slime's unbounded filter)")
    ns = p.parse_args()
    names = ("set_current_rollout_id", "generate_rollout_async", "init_http_client", "load_function")
    slime = loop.slime_api(*names)
    if slime is None:
        return 2
    from slime_tau_plugin.adapters.slime.metrics import log_rollout

    ns.max_response_len, ns.max_tokens_per_gpu, ns.max_context_len, ns.extra_flags = 1024, 16384, 16384, ""
    logging.basicConfig(level=logging.WARNING, force=True)
    tally = faults.LogTally(logging.INFO, width=100_000)
    for name in ("slime_tau_plugin.adapters.slime.redraw", "slime_tau_plugin.adapters.slime.metrics"):
        logging.getLogger(name).addHandler(tally)
        logging.getLogger(name).setLevel(logging.INFO)
    tok, server, bad = loop.tokenizer_dir(), None, []
    with tempfile.TemporaryDirectory(prefix="slime-redraw-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            train, eval_yaml = loop.prepare(tmp, ["tau2/retail/test"])
            server, url = loop.start_server(tok, 0, tmp / "server.log", "echo" if ns.pin == 0 else "oracle")
            extra = "" if ns.max_redraws is None else f", tau_max_redraws: {ns.max_redraws}"
            (tau_yaml := tmp / "tau.yaml").write_text(loop.TAU_YAML.replace("}", extra + "}"))
            args = loop.build_args(ns, tok, url, train, eval_yaml, tau_yaml)
            slime.init_http_client(args)
            data_source = slime.load_function(args.data_source_path)(args)
            batches = [0]

            def get_samples(num: int) -> list:
                batches[0] += 1
                return data_source.get_samples(num)

            t, o, k = args.rollout_batch_size, args.over_sampling_batch_size, args.n_samples_per_prompt
            print(
                f"filter {ns.filter}, tau_max_redraws {ns.max_redraws if ns.max_redraws is not None else 'unset (1)'}"
                f", pass rate pinned at {ns.pin}: rollout batch {t} groups x {k}, over-sampling batch {o}"
            )
            for step in range(ns.steps):
                slime.set_current_rollout_id(step)  # what RolloutManager.generate does first
                batches[0] = 0
                faults.verdicts.clear()
                t0 = time.monotonic()
                out, how, ended = faults.run_capped(
                    slime.generate_rollout_async(args, step, get_samples), args, ns.timeout_s
                )
                result = out[0] if out is not None else None
                logged: dict[str, float] = {}
                if result is not None:  # RolloutManager.generate: log_rollout_data runs the custom log hook
                    before = len(tally.lines)
                    log_rollout(step, args, result.samples, result.metrics, ended - t0)
                    for line in tally.lines[before:]:
                        logged |= {k: float(v) for k, v in re.findall(r"'rollout/tau/redraw/(\w+)': ([-0-9.e]+)", line)}
                bad += step_report(args, step, batches[0], result, how, ended - t0, logged, ns.filter == "tau")
                if result is None:
                    break
        finally:
            loop.stop_started(server)
    bound_lines = [line for line in tally.lines if BOUND_LINE in line]
    for line in bound_lines:
        print(f"logged: {line}")
    if ns.filter == "slime":
        looping = "still looping" in how
        print("PASS: slime's unbounded filter was still drawing at the cap" if looping else "FAIL: the step ended")
        return 0 if looping else 1
    if ns.filter == "tau" and ns.pin == 0 and len(bound_lines) < ns.steps:
        bad.append(f"the bound's line was logged {len(bound_lines)} times in {ns.steps} steps")
    return loop.verdict(bad)


if __name__ == "__main__":
    sys.exit(main())
