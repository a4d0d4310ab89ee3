"""``slime-tau show``: one trajectory, turn by turn, with the loss mask visible; or two runs compared.

Every contiguous run of ids with the same mask is one block: ``MODEL`` blocks (mask 1, trainable) are
highlighted, ``context`` blocks (mask 0: tool output, user turns, template glue) are dimmed. ``--html``
writes the same view as a self-contained page (``show_html.py``) with the prompt, the reward breakdown,
the error of a failed sample and per-token log-probs; ``--compare`` prints two runs' pass^k side by side
(``compare.py``). Reading the run back, damaged or not, is ``run_files.py``'s job.

The same view reads slime's ``--save-debug-rollout-data`` dumps, so a training run can be inspected as it
goes: a ``.pt`` file (read by ``rollout_dump.py``, torch needed only for tensors) or a directory of them
(one summary line per rollout, then the last training rollout or ``--rollout ID``), with a per-domain
summary (``dump_summary.py``) above the sample. A dump records no tokenizer: without ``--tokenizer`` the
blocks are shown with their sizes only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.run_dir.rollout_dump import DumpFile, dump_files, is_dump_path, pick_dump, read_dump
from slime_tau_plugin.tools.cli.run_dir.run_files import (
    SamplesFile,
    ShownSample,
    cut_off_warning,
    read_samples,
    resolve_tokenizer,
    shown_row,
    shown_sample,
    task_key,
)
from slime_tau_plugin.tools.cli.views.review_view import review_lines

GREEN, DIM, BOLD, RESET = "\033[32m", "\033[2m", "\033[1m", "\033[0m"
Decode = Callable[[list[int]], str]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "show",
        help="print one trajectory with its loss mask (or compare two runs)",
        description="Show one trajectory of a rollout run with its loss mask, or compare two runs' pass^k.",
    )
    p.add_argument(
        "run_dir",
        nargs="?",
        default="runs/latest",
        help="the --out directory of a rollout, or its samples.jsonl; or a slime --save-debug-rollout-data dump "
        "(.pt) or a directory of them (default: %(default)s)",
    )
    p.add_argument(
        "--rollout",
        default=None,
        metavar="ID",
        help="with a directory of slime dumps: the dump to show, e.g. 12 or eval_12 "
        "(default: the last training rollout)",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=None,
        metavar="N",
        help="position of the sample in samples.jsonl or the dump, from 0 (default: 0; not with --task)",
    )
    p.add_argument(
        "--task",
        default=None,
        metavar="ID",
        help="pick the sample by τ task id (metadata task_id, else task_index) instead of --sample (default: none)",
    )
    p.add_argument("--trial", type=int, default=0, metavar="K", help="trial of --task, from 0 (default: %(default)s)")
    p.add_argument(
        "--tokenizer",
        default=None,
        metavar="DIR",
        help="tokenizer directory to decode with (default: the one recorded in the run's summary.json)",
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="FILE",
        help="also write a self-contained HTML page: prompt, reward breakdown, error, log-prob per token "
        "(default: none)",
    )
    p.add_argument("--color", action="store_true", help="ANSI colours (default: on when stdout is a terminal)")
    p.add_argument(
        "--compare",
        default=None,
        metavar="DIR2",
        help="print pass^k per domain of run_dir (A) and DIR2 (B) side by side with B − A, from their summary.json "
        "(default: none)",
    )


def select_index(samples: SamplesFile | DumpFile, sample: int | None, task: str | None, trial: int) -> int:
    """The position to show: ``--sample N``, or the first row of ``--task ID`` with ``--trial K``.

    Raises:
        ConfigError: out of range, or no row of that task/trial (the message lists what there is).
    """
    n = len(samples)
    if task is None:
        index = 0 if sample is None else sample
        if not 0 <= index < n:
            raise ConfigError(f"--sample {index} is out of range: {samples.path} has {n} samples (--sample 0-{n - 1})")
        return index
    trials: dict[str, set[int]] = {}
    for i in range(n):
        row = samples.row(i)
        meta = row.get("metadata") if row is not None else None
        if not isinstance(meta, dict):
            continue
        key, row_trial = task_key(meta), meta.get("trial", 0)
        if key == task and row_trial == trial:
            return i
        trials.setdefault(key, set()).add(row_trial)
    if task in trials:
        listed = ", ".join(str(t) for t in sorted(trials[task], key=str))
        raise ConfigError(f"task {task} has no trial {trial} in {samples.path}; its trials: {listed}")
    keys = sorted(trials, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
    listed = ", ".join(keys[:20]) + (f", … ({len(keys)} in all)" if len(keys) > 20 else "")
    raise ConfigError(f"no sample of task {task} in {samples.path}; its tasks: {listed or 'none readable'}")


def headline(s: ShownSample) -> str:
    """Task, trial, status, reward, turns and why the episode ended, on one line."""
    meta = s.metadata
    where = "/".join(str(meta.get(k)) for k in ("benchmark", "domain", "split"))
    reward = f"{s.reward}" + (f" (τ reward {meta['task_reward']})" if "task_reward" in meta else "")
    return (
        f"{where} task {task_key(meta)} trial {meta.get('trial', '?')} | status {s.status} | reward {reward} | "
        f"turns {meta.get('num_turns')} | ended by {meta.get('termination_reason')}"
    )


def render_text(s: ShownSample, decode: Decode | None, color: bool = False) -> str:
    """The trajectory as text: headline, error, reward breakdown, then one block per run of equal mask.

    Without ``decode`` (no tokenizer known) each block is its label only.
    """
    meta = s.metadata
    lines = [
        headline(s),
        f"prompt: {len(s.prompt_ids)} ids (system policy + first user message), not part of the response",
    ]
    if meta.get("error"):
        lines.append(f"error: {meta['error']}")
    lines += review_lines(meta)  # the flagged customer message, marked
    breakdown = (
        (meta.get("reward_info") or {}).get("reward_breakdown") if isinstance(meta.get("reward_info"), dict) else None
    )
    if isinstance(breakdown, dict) and breakdown:
        lines.append("reward breakdown: " + "  ".join(f"{k}={v}" for k, v in breakdown.items()))
    info = meta.get("reward_info")
    if isinstance(info, dict) and isinstance(info.get("partial_scores"), dict):
        parts = "  ".join(f"{k}={v:.3g}" for k, v in info["partial_scores"].items())
        lines.append(f"partial score: {info.get('partial_score')}" + (f" ({parts})" if parts else ""))
    response = list(s.response_ids)
    for trainable, start, end in s.mask_runs():
        n = end - start
        label = f"MODEL, trainable, {n} ids" if trainable else f"context, masked, {n} ids"
        if decode is None:
            lines.append(f"[{label}]")
            continue
        body = decode(response[start:end]).rstrip("\n")
        if color:
            style = GREEN + BOLD if trainable else DIM
            lines.append(f"{style}[{label}]{RESET}\n{style}{body}{RESET}")
        else:
            lines.append(f"[{label}]\n{body}")
    n_train = sum(s.loss_mask)
    lines.append(
        f"response: {s.response_length} ids, {n_train} trainable (mask 1), {s.response_length - n_train} masked"
    )
    if decode is None:
        lines.append("pass --tokenizer DIR (the model's tokenizer) to see the text of each block")
    return "\n".join(lines)


def run(ns: argparse.Namespace) -> int:
    if ns.compare is not None:
        return _compare(ns)
    if ns.task is None and ns.trial != 0:
        raise ConfigError(f"--trial {ns.trial} needs --task ID (the trial of which task?)")
    if ns.task is not None and ns.sample is not None:
        raise ConfigError("pass either --sample N or --task ID [--trial K], not both")
    if is_dump_path(ns.run_dir):
        return _show_dump(ns)
    if ns.rollout is not None:
        raise ConfigError(f"--rollout picks a dump in a directory of slime dumps; {ns.run_dir} is not one")
    samples = read_samples(ns.run_dir)
    index = select_index(samples, ns.sample, ns.task, ns.trial)
    sample = shown_sample(samples, index)
    warning = cut_off_warning(samples)
    if warning:
        print(warning, file=sys.stderr)
    tokenizer_dir = resolve_tokenizer(ns.run_dir, ns.tokenizer)
    if ns.html and not Path(ns.html).parent.is_dir():
        raise ConfigError(f"--html {ns.html}: the directory {Path(ns.html).parent} does not exist; create it first")

    return _output(ns, sample, _decoder(tokenizer_dir), source=str(samples.path), total=len(samples))


def _show_dump(ns: argparse.Namespace) -> int:
    """A sample of one slime dump, after the per-rollout table (a directory) and the per-domain summary."""
    from slime_tau_plugin.tools.cli.views.dump_summary import domain_summary, rollout_table

    if ns.tokenizer is not None and not Path(ns.tokenizer).exists():
        raise ConfigError(f"--tokenizer {ns.tokenizer}: no such directory; pass the tokenizer of the trained model")
    if ns.html and ns.tokenizer is None:
        raise ConfigError("--html needs --tokenizer DIR with a slime dump (a dump records no tokenizer)")
    if ns.html and not Path(ns.html).parent.is_dir():
        raise ConfigError(f"--html {ns.html}: the directory {Path(ns.html).parent} does not exist; create it first")
    path, header = Path(ns.run_dir), []
    if path.is_dir():
        dumps = [read_dump(p) for p in dump_files(path)]
        chosen = pick_dump(path, ns.rollout)
        dump = next(d for d in dumps if d.path == chosen)
        header += [f"{len(dumps)} dumps in {path}:", *rollout_table(dumps), ""]
    elif ns.rollout is not None:
        raise ConfigError(f"--rollout picks a dump in a directory; {path} is one file (pass its directory)")
    else:
        dump = read_dump(path)
    if not dump.rows:
        raise ConfigError(f"{dump.path} holds no samples (the rollout returned none); pick another dump")
    index = select_index(dump, ns.sample, ns.task, ns.trial)
    sample = shown_row(dump.row(index), index, dump.where(index), mask_default=1)
    rid = "?" if dump.rollout_id is None else dump.rollout_id
    kind = "evaluation after rollout" if dump.path.stem.startswith("eval_") else "rollout"
    header += [f"{dump.path}: {kind} {rid}, {len(dump)} samples", *domain_summary(dump.rows), ""]
    decode = _decoder(ns.tokenizer) if ns.tokenizer else None
    return _output(ns, sample, decode, source=str(dump.path), total=len(dump), header=header)


def _decoder(tokenizer_dir: str) -> Decode:
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_dir)
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)


def _output(
    ns: argparse.Namespace,
    sample: ShownSample,
    decode: Decode | None,
    *,
    source: str,
    total: int,
    header: list[str] | None = None,
) -> int:
    """Write ``--html`` (first, so the page exists even when stdout is cut short by ``| head``), then print."""
    if ns.html and decode is not None:
        from slime_tau_plugin.tools.cli.views.show_html import render_html

        page = render_html(sample, decode, source=source, total=total)
        try:
            Path(ns.html).write_text(page, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write --html {ns.html}: {exc.strerror or exc}; pass a writable file") from exc
    try:
        if header:
            print("\n".join(header))
        print(render_text(sample, decode, color=ns.color or sys.stdout.isatty()))
        if ns.html:
            print(f"wrote {ns.html}")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader (``head``, ``less``) left: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _compare(ns: argparse.Namespace) -> int:
    from slime_tau_plugin.tools.cli.views.compare import compare_runs

    if is_dump_path(ns.run_dir) or is_dump_path(ns.compare):
        raise ConfigError("--compare reads two rollout runs' summary.json; a slime dump has none (show it alone)")
    given = {"--sample": ns.sample, "--task": ns.task, "--html": ns.html, "--tokenizer": ns.tokenizer}
    given["--rollout"] = ns.rollout
    extra = [flag for flag, value in given.items() if value is not None]
    if extra:
        raise ConfigError(f"--compare prints a pass^k table of two runs; drop {', '.join(extra)}")
    print(compare_runs(ns.run_dir, ns.compare))
    return 0
