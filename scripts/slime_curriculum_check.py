"""The curriculum and the per-task record through slime's OWN data source and rollout loop, on a CPU box.

Starts ``slime-tau serve --policy oracle`` and a chat user that opens ``--wrong-share`` of episodes with a line the
oracle cannot place (reward 0), so some tasks are always solved over their window and others are not. Writes
``--tasks`` retail train rows, then plays two phases, each a fresh process (a restart is a new process):

1. steps ``0..--steps-1``: slime's ``generate_rollout`` with ``--data-source-path
   slime_tau_plugin.adapters.slime.curriculum.TauCurriculumDataSource`` and our all-samples hook; the record is
   written to ``--save``;
2. a resume as slime's ``--load`` from the checkpoint of step ``--steps-3`` would make it: the record is read
   back, steps ``--steps-2`` and ``--steps-1`` are played again (they must not be counted twice), then two new
   steps and an eval through slime's ``eval_rollout`` and its eval log (the held-out check).

Prints per step: groups the data source looked at, skipped, the share drawn down, the tasks drawn less, and
how often a group of a task at full weight vs a down-weighted one was taken. Exit 0 when down-weighted tasks were
taken less often than full-weight ones, the resumed record holds every count of phase 1 and no replayed step was
counted twice, and the eval logged ``train_pass_rate`` beside ``pass^1``.

Run (the venv and slime checkout of scripts/slime_loop_check.py), from the repository root:
    PYTHONPATH=$PWD:../slime-scratch ../slime-venv/bin/python scripts/slime_curriculum_check.py [--steps 10]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import slime_loop_check as loop
import slime_loop_faults as faults

DATA_SOURCE = "slime_tau_plugin.adapters.slime.curriculum.TauCurriculumDataSource"
ALL_SAMPLES = "slime_tau_plugin.adapters.slime.all_samples.process_all_samples"
EVAL_LOG = "slime_tau_plugin.adapters.slime.metrics.log_eval"


def phase(ns: argparse.Namespace) -> int:
    """One process's steps: print one JSON line per step (and per eval)."""
    from slime.observability.rollout_metrics import log_eval_rollout_data
    from slime.rollout.sample_hooks import set_current_rollout_id
    from slime.rollout.sglang_rollout import eval_rollout, generate_rollout
    from slime.utils.async_utils import run
    from slime.utils.http_utils import init_http_client
    from slime.utils.misc import load_function

    logging.basicConfig(level=logging.WARNING, force=True)
    emitted: list[dict[str, Any]] = []

    class Emitted(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.msg.startswith("tau metrics") and isinstance(record.args, tuple):
                emitted.append(dict(record.args[2]))

    metrics_log = logging.getLogger("slime_tau_plugin.adapters.slime.metrics")
    metrics_log.addHandler(Emitted())
    metrics_log.setLevel(logging.INFO)
    ns.extra_flags = (
        f"--data-source-path {DATA_SOURCE} --rollout-all-samples-process-path {ALL_SAMPLES} "
        f"--custom-eval-rollout-log-function-path {EVAL_LOG} --rollout-seed 7"
        + (" --partial-rollout" if ns.partial else "")
    )
    args = loop.build_args(ns, ns.tok, ns.url, Path(ns.train), Path(ns.eval_yaml), Path(ns.tau_yaml))
    args.save, args.load = ns.save, ns.save if ns.resume else None
    args.num_rollout = ns.last + 1
    init_http_client(args)
    data_source = load_function(args.data_source_path)(args)
    if ns.resume:
        data_source.load(ns.first - 1)  # what RolloutManager does with --load (slime's own offsets)
    draws = data_source._tau_run.draws
    weights = {"full": [0, 0], "down": [0, 0]}  # [looked at, taken] per weight class
    keep = draws.keep

    def counted_keep(stats: Any, group_index: int) -> bool:
        from slime_tau_plugin.reporting.curriculum_rule import task_weight

        kind = "full" if task_weight(stats, draws.settings) >= 1.0 else "down"
        kept = keep(stats, group_index)
        weights[kind][0] += 1
        weights[kind][1] += kept
        return kept

    draws.keep = counted_keep
    for rid in range(ns.first, ns.last + 1):
        set_current_rollout_id(rid)
        before = {k: list(v) for k, v in weights.items()}
        emitted.clear()
        generate_rollout(args, rid, data_source)
        data_source.save(rid)  # slime's checkpoint of its offsets (every step here; SAVE_INTERVAL in a run)
        step = {k: [weights[k][i] - before[k][i] for i in (0, 1)] for k in weights}
        cur = {k.split("/")[-1]: v for m in emitted for k, v in m.items() if k.startswith("rollout/tau/curriculum/")}
        rec = {k.split("/")[-1]: v for m in emitted for k, v in m.items() if k.startswith("rollout/tau/record/")}
        down = sorted(k.split("curriculum/weight/")[1] for m in emitted for k in m if "curriculum/weight/" in k)
        print(json.dumps({"step": rid, "draws": step, "curriculum": cur, "record": rec, "down_weighted": down}))
    if ns.eval_at_end:
        emitted.clear()
        out, _ = run(eval_rollout(args, ns.last))
        log_eval_rollout_data(ns.last, args, out.data, out.metrics)
        held = {k: v for m in emitted for k, v in m.items() if "/pass^1" in k or "train_" in k}
        print(json.dumps({"eval": ns.last, "heldout": held}))
    return 0


def eval_paths(eval_yaml: Path) -> list[Path]:
    import yaml

    data = yaml.safe_load(eval_yaml.read_text()) or {}
    return [Path(d["path"]) for d in (data.get("eval") or {}).get("datasets") or []]


def run_phase(base: list[str], first: int, last: int, *extra: str) -> list[dict[str, Any]]:
    cmd = [*base, "--phase", "--first", str(first), "--last", str(last), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"phase {first}..{last} failed ({out.returncode}):\n{out.stdout[-3000:]}{out.stderr[-5000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=8, help="retail train tasks in the dataset")
    p.add_argument("--steps", type=int, default=6, help="phase 1 steps (>= 3)")
    p.add_argument("--n-train-groups", type=int, default=2, help="slime --rollout-batch-size")
    p.add_argument("--extra-groups", type=int, default=1)
    p.add_argument("--n-samples-per-prompt", type=int, default=2)
    p.add_argument("--window", type=int, default=2, help="tau_curriculum_window")
    p.add_argument("--floor", type=float, default=0.25, help="tau_curriculum_floor")
    p.add_argument("--wrong-share", type=float, default=0.3, help="episodes the user opens wrongly (reward 0)")
    p.add_argument("--latency-ms", type=int, default=20)
    p.add_argument("--partial", action="store_true", help="slime's --partial-rollout: aborted groups come back first")
    # phase-only (set by main for the child processes)
    for flag in ("--url", "--tok", "--train", "--eval-yaml", "--tau-yaml", "--save"):
        p.add_argument(flag, default=None, help=argparse.SUPPRESS)
    p.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--resume", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--eval-at-end", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--last", type=int, default=0, help=argparse.SUPPRESS)
    ns = p.parse_args()
    ns.max_response_len, ns.max_tokens_per_gpu, ns.max_context_len, ns.filter = 1024, 9216, 16384, "none"
    if ns.phase:
        return phase(ns)
    try:
        import slime.rollout.data_source  # noqa: F401
    except ImportError as exc:
        print(f"slime is not importable ({exc}); run with PYTHONPATH=$PWD:<slime checkout> in slime's venv")
        return 2
    tok, server, user = loop.tokenizer_dir(), None, None
    with tempfile.TemporaryDirectory(prefix="slime-curriculum-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            train, eval_yaml = loop.prepare(tmp, ["tau2/retail/test"])
            for path in [train, *eval_paths(eval_yaml)]:  # a small dataset: tasks come round again soon
                rows = path.read_text().splitlines()[: ns.tasks]
                path.write_text("\n".join(rows) + "\n")
            server, url = loop.start_server(tok, ns.latency_ms, tmp / "server.log")
            user, user_url = faults.start_user("flaky", 0.0, ns.wrong_share)
            tau_yaml = tmp / "tau.yaml"
            tau_yaml.write_text(
                faults.user_yaml(loop.TAU_YAML, user_url).replace(
                    "}", f", tau_curriculum_window: {ns.window}, tau_curriculum_floor: {ns.floor}}}"
                )
            )
            base = [sys.executable, __file__, "--url", url, "--tok", tok, "--train", str(train)]
            base += ["--eval-yaml", str(eval_yaml), "--tau-yaml", str(tau_yaml), "--save", str(tmp / "save")]
            base += [f"--{k.replace('_', '-')}={getattr(ns, k)}" for k in ("n_train_groups", "extra_groups")]
            base += [f"--n-samples-per-prompt={ns.n_samples_per_prompt}", f"--tasks={ns.tasks}"]
            base += ["--partial"] if ns.partial else []
            first = run_phase(base, 0, ns.steps - 1)
            record_1 = json.loads((tmp / "save" / "tau_task_record.json").read_text())
            second = run_phase(base, ns.steps - 2, ns.steps + 1, "--resume", "--eval-at-end")
            record_2 = json.loads((tmp / "save" / "tau_task_record.json").read_text())
        finally:
            loop.stop_started(server, user)
    return report(ns, first, second, record_1, record_2)


def report(ns: argparse.Namespace, first: list, second: list, rec1: dict, rec2: dict) -> int:
    print(f"{'phase':<6} {'step':>4} {'looked':>6} {'skipped':>7} {'share':>6}  full: taken/looked  down: taken/looked")
    totals = {"full": [0, 0], "down": [0, 0]}
    for name, rows in (("run", first), ("resume", second)):
        for row in (r for r in rows if "step" in r):
            d, c = row["draws"], row["curriculum"]
            for k in totals:
                totals[k][0] += d[k][0]
                totals[k][1] += d[k][1]
            print(
                f"{name:<6} {row['step']:>4} {int(c.get('looked_at', 0)):>6} {int(c.get('skipped', 0)):>7} "
                f"{c.get('drawn_down_share', 0):>6.2f}  {d['full'][1]:>4}/{d['full'][0]:<13} {d['down'][1]:>4}/"
                f"{d['down'][0]:<5} counted={int(row['record'].get('counted', -1))} drawn less: "
                f"{', '.join(t.split('/')[-1] for t in row['down_weighted']) or '-'}"
            )
    rate = {k: (v[1] / v[0] if v[0] else float("nan")) for k, v in totals.items()}
    print(
        f"taken when looked at: full weight {rate['full']:.2f} ({totals['full']}), down-weighted {rate['down']:.2f} "
        f"({totals['down']}); floor {ns.floor}"
    )
    replayed = [r for r in second if "step" in r and r["step"] < ns.steps]
    no_double = all(r["record"].get("counted") == 0.0 for r in replayed)
    kept = (
        all(rec2["tasks"].get(t, {}).get("attempts", -1) >= s["attempts"] for t, s in rec1["tasks"].items())
        and rec2["last_step"] == ns.steps + 1
    )
    new_steps = {str(s) for s in range(ns.steps, ns.steps + 2)}
    new_attempts = sum(a for s, per in rec2["steps"].items() if s in new_steps for a, _ in per.values())
    sums = (
        sum(t["attempts"] for t in rec2["tasks"].values())
        == sum(t["attempts"] for t in rec1["tasks"].values()) + new_attempts
    )
    n1, n2 = (sum(t["attempts"] for t in r["tasks"].values()) for r in (rec1, rec2))
    print(
        f"record after run: {len(rec1['tasks'])} tasks, last step {rec1['last_step']}, {n1} attempts; after resume: "
        f"last step {rec2['last_step']}, {n2} attempts (+{new_attempts} from the 2 new steps)"
    )
    print(f"replayed steps counted again: {'no' if no_double else 'YES'}; phase-1 counts kept: {kept and sums}")
    held = next((r["heldout"] for r in second if "eval" in r), {})
    print("held-out check:", json.dumps(held, sort_keys=True))
    ok = (
        totals["down"][0] > 0
        and rate["down"] < rate["full"]
        and no_double
        and kept
        and sums
        and any(k.endswith("train_pass_rate") for k in held)
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
