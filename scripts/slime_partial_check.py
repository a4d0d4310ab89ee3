"""slime's own ``generate_rollout`` with ``--partial-rollout``, step after step, checked token by token.

Runs slime's ``sglang_rollout.generate_rollout`` (its default rollout: over-sampling, end-of-step ``abort``,
aborted groups back into the buffer) for ``--steps`` steps against ``slime-tau serve --policy oracle`` with a
per-request latency, so episodes are in flight (between turns or mid-generation) at every abort. For every kept
sample it then plays the same task uninterrupted through the engine and compares: tokens and rollout log-probs
equal, loss mask equal except where slime zeroed an earlier response (``--mask-offpolicy-in-partial-rollout``),
reward 1.0; a sample slime handed back (``start_rollout_id`` before this step) must have resumed, not restarted.
Prints per step: kept, resumed, turns reused, aborted episodes suspended / thrown away and their turns.
``--no-partial`` runs the same loop without ``--partial-rollout`` (the baseline: aborted work is thrown away).
Weights are pushed as ``train.py`` does (after every step, ``slime_lag.push``) and each step's trainable ids are
reported by weight lag against the weights that train them (``weight_lag.lag_metrics``, the log hook's numbers).

Setup and PYTHONPATH: as ``slime_loop_check.py`` (slime checkout on PYTHONPATH, the scratch venv). Exit 0 when
every check holds.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import sys
import tempfile
import time
from pathlib import Path

import slime_lag
import slime_loop_check as loop
import slime_loop_faults as faults


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--n-train-groups", type=int, default=4)
    p.add_argument("--extra-groups", type=int, default=6, help="over-sampling: groups drawn beyond the batch")
    p.add_argument("--n-samples-per-prompt", type=int, default=2)
    p.add_argument("--latency-ms", type=int, default=150)
    p.add_argument("--mask-offpolicy", action="store_true", help="slime's --mask-offpolicy-in-partial-rollout")
    p.add_argument("--no-partial", action="store_true", help="baseline: without --partial-rollout")
    p.add_argument("--episode-workers", type=int, default=0, help="tau_episode_workers (0: in slime's process)")
    p.add_argument("--max-weight-lag", type=int, default=None, help="tau_max_weight_lag")
    ns = p.parse_args()
    ns.max_response_len, ns.max_tokens_per_gpu, ns.max_context_len = 4096, 16384, 16384
    ns.filter, ns.user = "none", "scripted"
    flags = [] if ns.no_partial else ["--partial-rollout"]
    ns.extra_flags = " ".join(flags + (["--mask-offpolicy-in-partial-rollout"] if ns.mask_offpolicy else []))
    ns.extra_flags += f" --num-rollout {ns.steps}"
    return ns


async def uninterrupted(args, samples) -> list:
    """The same tasks played once each without interruption, through the engine, on the same server."""
    from slime_tau_plugin.adapters.slime.args import config_from_args
    from slime_tau_plugin.engine.data import task_ref_from_sample
    from slime_tau_plugin.engine.loop.run import run_episode
    from slime_tau_plugin.engine.resources import EpisodeResources

    config = config_from_args(args)
    resources = await EpisodeResources.for_config(config)
    params = {"temperature": 1.0, "max_new_tokens": args.rollout_max_response_len}
    refs = [task_ref_from_sample(s.prompt, s.metadata, config) for s in samples]
    out = await asyncio.gather(*[run_episode(resources, resources.policy, ref, dict(params)) for ref in refs])
    await resources.aclose()
    return out


CALLS: list[tuple[int, int, str, bool]] = []
"""(step, sample index, status handed in, held a state or no response) for every call of our generate."""
STEP = {"now": 0}


def instrument() -> None:
    """Record what slime hands our generate (slime loads it by the path its flag names, at each call)."""
    import importlib

    plugin = importlib.import_module("slime_tau_plugin.generate")
    generate = plugin.generate

    async def recorded(args, sample, sampling_params, evaluation=False):
        held = "tau_episode_state" in (sample.metadata or {}) or not sample.response_length  # nothing to resume
        CALLS.append((STEP["now"], sample.index, sample.status.name, held))
        return await generate(args, sample, sampling_params, evaluation=evaluation)

    plugin.generate = recorded


def restarted(step: int) -> list[int]:
    """Samples slime handed back ABORTED in ``step`` that held no state: they start again from turn 1."""
    return [index for s, index, status, held in CALLS if s == step and status == "ABORTED" and not held]


def check(sample, full, rollout_id: int, masked: bool) -> str | None:
    """Why ``sample`` is not the uninterrupted episode ``full`` (None when it is)."""
    traj, meta = full.trajectory, sample.metadata
    if sample.status.name != "COMPLETED" or sample.reward != 1.0:
        return f"status {sample.status.name} reward {sample.reward}: {meta.get('error')}"
    if list(sample.tokens) != traj.ids:
        return "tokens differ"
    ours, want = list(sample.loss_mask), traj.loss_mask
    trained = zip(sample.rollout_log_probs, traj.rollout_log_probs, ours, strict=True)
    if any(got != lp for got, lp, m in trained if m):  # slime zeroes the mask of finished siblings, not their log-probs
        return "rollout log-probs differ"
    if any(a > b for a, b in zip(ours, want, strict=True)):
        return "a template id is trainable"
    handed_back = meta.get("start_rollout_id", rollout_id) < rollout_id  # slime zeroes even finished siblings
    late = meta.get("tau_train_lag") or 0  # tau_max_weight_lag at train time: a queued fully-async group too
    if ours != want and not (masked and (meta.get("tau_suspensions") or handed_back or late)):
        return "loss mask differs"
    if sample.index in restarted(rollout_id):
        return f"handed back ABORTED from step {meta.get('start_rollout_id')} without its state: restarted from turn 1"
    return None


def main() -> int:
    ns = parse()
    slime = loop.slime_api(
        "generate_rollout", "init_http_client", "load_function", setup="see slime_loop_check.py for the set-up"
    )
    if slime is None:
        return 2
    from slime_tau_plugin.adapters.slime.partial import abort_tally

    logging.basicConfig(level=logging.WARNING, force=True)
    tok = loop.tokenizer_dir()
    rows, failures = [], []
    with tempfile.TemporaryDirectory(prefix="slime-partial-") as tmp_name:
        tmp = Path(tmp_name)
        server, url = loop.start_server(tok, ns.latency_ms, tmp / "server.log")
        try:
            train, eval_yaml = loop.prepare(tmp, ["tau2/retail/test"])
            (tau_yaml := tmp / "tau.yaml").write_text(
                slime_lag.with_max_lag(faults.with_workers(loop.TAU_YAML, ns.episode_workers), ns.max_weight_lag)
            )
            args = loop.build_args(ns, tok, url, train, eval_yaml, tau_yaml)
            slime.init_http_client(args)
            data_source = slime.load_function(args.data_source_path)(args)
            instrument()
            lags = slime_lag.LagLog(ns.max_weight_lag)
            slime_lag.push(url, 1)  # train.py pushes the weights before the first rollout
            for step in range(ns.steps):
                STEP["now"] = step
                t0 = time.monotonic()
                out = slime.generate_rollout(args, step, data_source)
                took = time.monotonic() - t0
                tally = abort_tally().take()
                flat = [s for group in out.samples for s in group]
                lags.step(step, flat)  # what the log hook logs: slime trains these samples now
                slime_lag.push(url, step + 2)  # after the step trains
                fulls = asyncio.run(uninterrupted(args, flat))
                masked = ns.mask_offpolicy or ns.max_weight_lag is not None  # resumed / handed back: masks allowed
                for sample, full in zip(flat, fulls, strict=True):
                    if (why := check(sample, full, step, masked)) is not None:
                        failures.append(f"step {step} sample {sample.index}: {why}")
                metas = [s.metadata for s in flat]
                turns = collections.Counter(m["num_turns"] for m in metas)
                rows.append(
                    (
                        step,
                        len(flat),
                        sum(1 for m in metas if m.get("tau_suspensions")),
                        sum(m.get("tau_turns_reused", 0) for m in metas),
                        int(tally["partial/aborted_suspended"]),
                        int(tally["partial/aborted_thrown_away"]),
                        int(tally["partial/aborted_thrown_away_turns"]),
                        sum(m["num_turns"] for m in metas),
                        dict(sorted(turns.items())),
                        took,
                        len(getattr(data_source, "buffer", [])),
                    )
                )
            all_turns = [r.num_turns for r in asyncio.run(uninterrupted(args, data_source.dataset.samples))]
        finally:
            server.terminate()
            server.wait(10)
    mode = "default loop" if ns.no_partial else "--partial-rollout" + (" + mask-offpolicy" if ns.mask_offpolicy else "")
    print(f"\nslime generate_rollout, {mode}, latency {ns.latency_ms} ms/request, over-sampling +{ns.extra_groups}")
    print("step  kept  resumed  turns_reused  aborted:suspended  thrown_away(turns)  kept_turns  turns_hist  s  buffer")
    for r in rows:
        print(
            f"{r[0]:>4}  {r[1]:>4}  {r[2]:>7}  {r[3]:>12}  {r[4]:>17}  {r[5]:>11}({r[6]:>4})  {r[7]:>10}  {r[8]}  "
            f"{r[9]:.1f}  {r[10]}"
        )
    kept_turns = [t for r in rows[1:] for t, c in r[8].items() for _ in range(c)]  # steps 2+: a full pipeline
    every = sorted(all_turns)
    print(
        f"\nturns per episode, kept in steps 2+: mean {sum(kept_turns) / max(1, len(kept_turns)):.2f}, "
        f"hist {dict(sorted(collections.Counter(kept_turns).items()))}\n"
        f"turns per episode, every task of the split (uninterrupted): mean {sum(every) / max(1, len(every)):.2f}, "
        f"hist {dict(sorted(collections.Counter(every).items()))}\n"
        f"policy turns thrown away per step (steps 2+): {sum(r[6] for r in rows[1:]) / max(1, len(rows) - 1):.1f}"
    )
    print(f"\ntrainable ids by weight lag when trained (train.py: one push per step)\n{lags.report()}")
    if not ns.no_partial and not any(r[2] for r in rows[1:]):
        failures.append("no episode was resumed in steps 2+: nothing was in flight at an abort (raise --latency-ms)")
    print("\n".join(failures[:20]) or "PASS: every kept sample equals its uninterrupted episode, reward 1.0")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
