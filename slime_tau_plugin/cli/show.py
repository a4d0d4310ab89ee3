"""``slime-tau show``: one trajectory, turn by turn, with the loss mask visible.

Every contiguous run of ids with the same mask is one block: ``MODEL`` blocks (mask 1, trainable) are
highlighted, ``context`` blocks (mask 0: tool output, user turns, template glue) are dimmed. ``--html``
writes the same view as a self-contained page.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError

GREEN, DIM, BOLD, RESET = "\033[32m", "\033[2m", "\033[1m", "\033[0m"


def load_sample(run_dir: str | Path, index: int) -> dict[str, Any]:
    """Row ``index`` of ``run_dir/samples.jsonl``. Raises ConfigError naming the file or the valid range."""
    path = Path(run_dir) / "samples.jsonl"
    if not path.exists():
        raise ConfigError(f"{path} does not exist; pass the --out directory of a 'slime-tau rollout' run")
    rows = path.read_text(encoding="utf-8").splitlines()
    if not 0 <= index < len(rows):
        raise ConfigError(f"--sample {index} is out of range: {path} has {len(rows)} samples (0-{len(rows) - 1})")
    return json.loads(rows[index])


def mask_blocks(row: dict[str, Any], decode) -> list[tuple[bool, int, str]]:
    """``(is_trainable, n_ids, text)`` per run of equal mask in the response, in order."""
    response = row["tokens"][len(row["tokens"]) - row["response_length"] :]
    blocks: list[tuple[bool, int, str]] = []
    start = 0
    mask = row["loss_mask"]
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            blocks.append((bool(mask[start]), i - start, decode(response[start:i])))
            start = i
    return blocks


def headline(row: dict[str, Any]) -> str:
    """Task, status, reward, turns and why the episode ended, on one line."""
    meta = row["metadata"]
    return (
        f"{meta.get('benchmark')}/{meta.get('domain')}/{meta.get('split')} task {meta.get('task_id')} | "
        f"status {row['status']} | reward {row['reward']} | turns {meta.get('num_turns')} | "
        f"ended by {meta.get('termination_reason')}"
    )


def render_text(row: dict[str, Any], decode, color: bool = False) -> str:
    meta = row["metadata"]
    prompt_len = len(row["tokens"]) - row["response_length"]
    lines = [headline(row), f"prompt: {prompt_len} ids (system policy + first user message), not part of the response"]
    if meta.get("error"):
        lines.append(f"error: {meta['error']}")
    for trainable, n, text in mask_blocks(row, decode):
        label = f"MODEL, trainable, {n} ids" if trainable else f"context, masked, {n} ids"
        body = text.rstrip("\n")
        if color:
            style = GREEN + BOLD if trainable else DIM
            lines.append(f"{style}[{label}]{RESET}\n{style}{body}{RESET}")
        else:
            lines.append(f"[{label}]\n{body}")
    n_train = sum(row["loss_mask"])
    n_masked = row["response_length"] - n_train
    lines.append(f"response: {row['response_length']} ids, {n_train} trainable (mask 1), {n_masked} masked")
    return "\n".join(lines)


def render_html(row: dict[str, Any], decode) -> str:
    parts = []
    for trainable, n, text in mask_blocks(row, decode):
        cls = "model" if trainable else "ctx"
        title = f"{'trainable' if trainable else 'masked'}: {n} ids"
        parts.append(f'<div class="{cls}" title="{title}"><span class="tag">{title}</span>{html.escape(text)}</div>')
    style = (
        "body{font-family:monospace;max-width:1100px;margin:auto}div{white-space:pre-wrap;margin:4px 0;padding:6px;"
        "border-radius:4px}.model{background:#d9f7d9;border-left:4px solid #2a2}.ctx{background:#f3f3f3;color:#555}"
        ".tag{display:block;font-size:11px;color:#888}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>slime-tau trajectory</title><style>{style}</style>"
        f"</head><body><h3>{html.escape(headline(row))}</h3>{''.join(parts)}</body></html>"
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print one trajectory with its loss mask")
    p.add_argument("run_dir", help="the --out directory of a rollout")
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--tokenizer", default=None, help="default: the tokenizer recorded in summary.json")
    p.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML page")
    p.add_argument("--color", action="store_true", help="ANSI colors (default when stdout is a terminal)")


def run(ns: argparse.Namespace) -> int:
    from ..templates import load_tokenizer

    row = load_sample(ns.run_dir, ns.sample)
    tokenizer_dir = ns.tokenizer
    if tokenizer_dir is None:
        summary_path = Path(ns.run_dir) / "summary.json"
        tokenizer_dir = json.loads(summary_path.read_text()).get("tokenizer") if summary_path.exists() else None
    if not tokenizer_dir:
        raise ConfigError("no tokenizer recorded for this run; pass --tokenizer")
    tokenizer = load_tokenizer(tokenizer_dir)

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    print(render_text(row, decode, color=ns.color or sys.stdout.isatty()))
    if ns.html:
        Path(ns.html).write_text(render_html(row, decode), encoding="utf-8")
        print(f"wrote {ns.html}")
    return 0
