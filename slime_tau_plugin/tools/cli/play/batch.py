"""Play a rollout's episodes into its run folder, then report: table or JSON, and the exit code.

``samples.jsonl`` gets each sample as it finishes; ``summary.json`` is written when the batch starts
(``state: running``, with the run record), at most once a second while samples finish (so a run killed
with SIGKILL still says what it holds), and at the end over every sample in the folder (a resumed run's
earlier ones included): ``finished`` or ``interrupted`` (Ctrl-C or SIGTERM: running episodes cancelled; a
second one stops at once and adds ``"stopped_at_once": true``), the word the terminal prints. Exit codes: 0; 1
when more than ``--max-failed-share`` of the samples FAILED (the most common error is printed); 130 after
Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.tools.cli.flag_names import in_cli_terms
from slime_tau_plugin.tools.cli.play.parse_check import EarlyParseCheck, ParserMismatchError
from slime_tau_plugin.tools.cli.play.progress import Progress
from slime_tau_plugin.tools.cli.play.runner import BatchResult, Episode, RolloutSample, format_summary, play, summarize
from slime_tau_plugin.tools.cli.play.stop_signals import signals_held
from slime_tau_plugin.tools.cli.run_dir.run_output import (
    RunDir,
    SampleWriter,
    discard_unplayed,
    is_retryable,
    write_summary,
)

EXIT_ALL_FAILED = 1
EXIT_INTERRUPTED = 130


def play_and_report(
    ns: argparse.Namespace,
    config: TauConfig,
    run_dir: RunDir,
    record: dict[str, Any],
    episodes: list[Episode],
    sampling: dict[str, Any],
) -> int:
    """Play ``episodes`` with ``config``, write the run folder, print; the exit code."""
    base = {"tokenizer": record["tokenizer"], "policy": ns.sglang_url or f"built-in {ns.policy or 'oracle'}"}
    base |= {"cwd": str(Path.cwd()), "run": record}
    write_summary(run_dir, {"state": "running", "interrupted": False, "domains": {}, **base})
    if run_dir.previous or run_dir.retried:
        again = f" ({len(run_dir.retried)} FAILED or past their deadline, played again)" if run_dir.retried else ""
        print(f"--resume: {len(run_dir.previous)} samples kept, {len(episodes)} to play{again}", file=sys.stderr)
        if stale := sum(is_retryable(row) for row in run_dir.previous):
            print(
                f"--resume: {stale} of the kept samples FAILED or passed their deadline; add --retry-failed to "
                "play them again",
                file=sys.stderr,
            )
    writer = SampleWriter(run_dir.samples_path)
    progress = Progress(len(episodes), done_before=len(run_dir.previous))
    earlier = [RolloutSample.from_row(row) for row in run_dir.previous]
    played: list[RolloutSample] = []
    t0 = last_write = time.perf_counter()

    check = EarlyParseCheck(ns.tool_call_parser, len(episodes), f"--overwrite --out {run_dir.shown}")

    def on_done(sample: RolloutSample) -> None:
        nonlocal last_write
        writer.write(sample.to_row())
        progress.update(sample)
        played.append(sample)
        check.add(sample)  # raises: the first episodes are mostly parse errors
        if time.perf_counter() - last_write >= 1.0:
            last_write = time.perf_counter()
            held = summarize(earlier + played, ns.samples_per_task, last_write - t0)
            write_summary(run_dir, {"state": "running", "interrupted": False, **held, **base})

    killed = stopped = False
    try:
        batch = asyncio.run(
            play(
                config,
                episodes,
                concurrency=ns.concurrency,
                sampling_params=sampling,
                seed=ns.seed,
                on_done=on_done,
                stop_on_sigint=True,
            )
        )
    except KeyboardInterrupt:  # a second Ctrl-C/SIGTERM: keep what finished, say so
        killed = True
        batch = BatchResult(played, interrupted=True)
    except ParserMismatchError as exc:  # what the first episodes showed: the folder says why it stopped
        held = summarize(earlier + played, ns.samples_per_task, time.perf_counter() - t0)
        write_summary(run_dir, {"state": "stopped", "interrupted": False, "stopped": str(exc), **held, **base})
        raise
    except BaseException:  # a setting an episode refused (ConfigError): nothing is left that blocks a rerun
        stopped = True
        raise
    finally:
        writer.close()
        progress.close()
        if stopped and not played:
            discard_unplayed(run_dir)
    with signals_held(then_exit_at_once=batch.interrupted):
        samples = earlier + batch.samples
        summary = summarize(samples, ns.samples_per_task, time.perf_counter() - t0)
        state = "interrupted" if batch.interrupted else "finished"  # "killed" is SIGKILL's: the terminal interrupted
        at_once = {"stopped_at_once": True} if killed else {}
        summary = {"state": state, "interrupted": batch.interrupted, **at_once, **summary, **base}
        write_summary(run_dir, summary)
        report = sys.stderr if ns.json else sys.stdout
        print(json.dumps(summary, indent=2, ensure_ascii=False) if ns.json else _table(summary))
        shown = run_dir.shown
        print(f"trajectories: {shown / 'samples.jsonl'}  summary: {shown / 'summary.json'}", file=report)
        return _exit_code(summary, run_dir, len(batch.samples), len(episodes), ns.max_failed_share)


def _table(summary: dict[str, Any]) -> str:
    return format_summary(summary) if summary["domains"] else "no episode finished"


def _exit_code(summary: dict[str, Any], run_dir: RunDir, finished: int, planned: int, max_failed: float) -> int:
    errors = summary["errors"]
    top = errors[0] if errors else None
    cause = f"; most common error ({top['samples']} samples): {in_cli_terms(top['error'])}" if top else ""
    if summary["interrupted"]:
        how = " (stopped at once by a second Ctrl-C/SIGTERM)" if summary.get("stopped_at_once") else ""
        print(
            f"interrupted{how}: {finished} of {planned} episodes finished; to continue, run the same command with "
            f"--resume --out {run_dir.shown}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    again = "the same command with --resume --retry-failed"
    retry = f"; to play them again once the endpoint is back: {again} --out {run_dir.shown}"
    if summary["samples"] and summary["failed"] == summary["samples"]:
        print(f"error: all {summary['samples']} samples FAILED{cause}{retry}", file=sys.stderr)
        return EXIT_ALL_FAILED
    if summary["samples"] and not summary.get("scored", 1):
        ends: Counter[str] = Counter()
        for domain in summary["domains"].values():
            ends.update(domain["terminations"])
        shown = ", ".join(f"{n} {reason}" for reason, n in ends.most_common())
        print(f"error: no sample was scored ({shown}): pass^k and rewards have no evidence{cause}", file=sys.stderr)
        return EXIT_ALL_FAILED
    if summary["samples"] and summary["failed"] / summary["samples"] > max_failed:
        print(
            f"error: {summary['failed']} of {summary['samples']} samples FAILED, above --max-failed-share "
            f"{max_failed:g}; pass^k counts only the {summary['samples'] - summary['failed']} that completed{cause}"
            f"{retry}",
            file=sys.stderr,
        )
        return EXIT_ALL_FAILED
    if summary["failed"]:
        print(f"warning: {summary['failed']} of {summary['samples']} samples FAILED{cause}", file=sys.stderr)
    return 0
