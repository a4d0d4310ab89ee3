"""``show --html``: one trajectory as a self-contained HTML page (inline CSS, no script, no external asset).

Top to bottom: the headline (task, trial, status, reward, termination), the error of a failed sample, the
reward breakdown (``metadata.reward_info``), the prompt (system message and opening user message from
``metadata.messages`` when the run recorded them, else the decoded prompt ids), the other metadata, and the
response ids coloured by loss mask: green = trainable (sampled by the policy, mask 1), one span per id with
its log-prob on hover (``title``); grey = masked context (tool output, user turns, template glue). Everything
that comes from the run is HTML-escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from slime_tau_plugin.tools.cli.run_dir.run_files import ShownSample, task_key
from slime_tau_plugin.tools.cli.views.review_view import review_html

Decode = Callable[[list[int]], str]
LOW_LOGPROB = math.log(0.1)  # sampled with probability < 10%: underlined, worth a look
SHOWN_ELSEWHERE = {"messages", "tools", "reward_info", "error", "termination_reason", "num_turns", "trial"}
SHOWN_ELSEWHERE |= {"tau_review"}
SHOWN_ELSEWHERE |= {"benchmark", "domain", "split", "task_id", "task_index"}

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;
color:#222;line-height:1.4}
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:22px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.src{color:#777;font-size:12px;margin:0 0 10px;word-break:break-all}
.facts span{display:inline-block;margin:0 14px 6px 0}
.badge{padding:2px 8px;border-radius:10px;font-weight:600;font-size:12px;color:#fff;background:#888}
.st-completed{background:#2a8a2a}.st-truncated{background:#c77700}.st-failed{background:#c62828}
.st-aborted{background:#666}
pre,.model,.ctx{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;white-space:pre-wrap;
word-break:break-word;tab-size:4}
pre{background:#f7f7f7;padding:8px;border-radius:4px;margin:4px 0}
.error{background:#fdecea;border:1px solid #e57373;border-radius:4px;padding:4px 10px}
.error pre{background:none;color:#b71c1c}
table.kv{border-collapse:collapse;font-size:13px}table.kv td{padding:2px 10px;border-bottom:1px solid #eee;
vertical-align:top}table.kv td:first-child{color:#555;white-space:nowrap}
.model,.ctx{margin:6px 0;padding:6px 8px;border-radius:4px}
.model{background:#eef8ee;border-left:4px solid #2a8a2a}
.ctx{background:#f3f3f3;color:#666;border-left:4px solid #bbb;max-height:16em;overflow:auto}
.tag{display:block;font:11px system-ui,sans-serif;color:#888;margin-bottom:3px}
.tok{background:#d4f0d4;border-radius:2px}.tok:nth-of-type(even){background:#a8dca8}
.tok.low{text-decoration:underline wavy #e07b00}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:4px}
details summary{cursor:pointer;color:#333}
"""


def token_pieces(ids: Sequence[int], decode: Decode) -> list[str]:
    """The text of each id; their concatenation is ``decode(ids)``.

    An id that ends inside a multi-byte character gets ``""`` and the id that completes it carries the whole
    character (decoding ids one by one would show U+FFFD halves).
    """
    pieces: list[str] = []
    start = 0
    for i in range(len(ids)):
        text = decode(list(ids[start : i + 1]))
        if text.endswith("\ufffd") and i + 1 < len(ids) and i + 1 - start < 4:
            pieces.append("")
            continue
        pieces.append(text)
        start = i + 1
    return pieces


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)


def _kv_table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(f"<tr><td>{escape(k)}</td><td>{escape(_text(v))}</td></tr>" for k, v in rows)
    return f"<table class='kv'>{cells}</table>"


def _header(s: ShownSample, source: str, total: int) -> str:
    meta = s.metadata
    where = "/".join(str(meta.get(k, "?")) for k in ("benchmark", "domain", "split"))
    facts = [
        f"<span class='badge st-{escape(s.status)}'>{escape(s.status.upper())}</span>",
        f"<span>reward <b>{escape(str(s.reward))}</b></span>",
        f"<span>ended by <b>{escape(str(meta.get('termination_reason', '?')))}</b></span>",
        f"<span>turns <b>{escape(str(meta.get('num_turns', '?')))}</b></span>",
    ]
    return (
        f"<h1>{escape(where)} · task {escape(task_key(meta))} · trial {escape(str(meta.get('trial', '?')))}</h1>"
        f"<p class='src'>sample {s.index} of {total} in {escape(source)}</p><div class='facts'>{''.join(facts)}</div>"
    )


def _error(meta: dict[str, Any]) -> str:
    if not meta.get("error"):
        return ""
    return f"<section class='error'><h2>Error</h2><pre>{escape(_text(meta['error']))}</pre></section>"


def _reward(meta: dict[str, Any]) -> str:
    info = meta.get("reward_info")
    if not isinstance(info, dict) or not info:
        return "<h2>Reward breakdown</h2><p>No breakdown recorded (the episode was not scored).</p>"
    rows: list[tuple[str, Any]] = []
    for key, value in info.items():
        if isinstance(value, dict) and value:
            rows += [(f"{key}.{k}", v) for k, v in value.items()]
        else:
            rows.append((key, value))
    return f"<h2>Reward breakdown</h2>{_kv_table(rows)}"


def _prompt(s: ShownSample, decode: Decode) -> str:
    messages = s.metadata.get("messages")
    head = f"<h2>Prompt ({len(s.prompt_ids)} ids, not part of the response)</h2>"
    if not isinstance(messages, list) or not messages:
        text = escape(decode(list(s.prompt_ids)))
        summary = "decoded prompt ids (messages were not recorded)"
        return f"{head}<details><summary>{summary}</summary><pre>{text}</pre></details>"
    system = next((m for m in messages if isinstance(m, dict) and m.get("role") == "system"), None)
    opening = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    parts = [head]
    if system is not None:
        body = _text(system.get("content", ""))
        parts.append(
            f"<details><summary>System message ({len(body)} characters)</summary><pre>{escape(body)}</pre></details>"
        )
    tools = s.metadata.get("tools")
    if isinstance(tools, list) and tools:
        names = [str((t.get("function") or t).get("name", "?")) for t in tools if isinstance(t, dict)]
        parts.append(f"<p>{len(tools)} tools offered: {escape(', '.join(names))}</p>")
    if opening is not None:
        parts.append(f"<p><b>Opening user message</b></p><pre>{escape(_text(opening.get('content', '')))}</pre>")
    return "".join(parts)


def _other_metadata(meta: dict[str, Any]) -> str:
    rows = [(k, v) for k, v in meta.items() if k not in SHOWN_ELSEWHERE and not isinstance(v, (dict, list))]
    return f"<h2>Metadata</h2>{_kv_table(rows)}" if rows else ""


def _token_span(piece: str, token_id: int, log_prob: float | None) -> str:
    if log_prob is None:
        return f"<span class='tok' title='id {token_id}'>{escape(piece)}</span>"
    low = " low" if log_prob < LOW_LOGPROB else ""
    return f"<span class='tok{low}' title='logprob {log_prob:.4f} · id {token_id}'>{escape(piece)}</span>"


def _response(s: ShownSample, decode: Decode) -> str:
    legend = (
        "<p class='legend'><span><i class='sw' style='background:#a8dca8'></i>trainable (mask 1): sampled by the "
        "policy; hover a token for its log-prob</span><span><i class='sw' style='background:#ddd'></i>masked "
        "(mask 0): tool output, user turns, template glue</span><span style='text-decoration:underline wavy "
        "#e07b00'>sampled with p &lt; 0.1</span></p>"
    )
    n_train = sum(s.loss_mask)
    counts = f"{s.response_length} ids, {n_train} trainable, {s.response_length - n_train} masked"
    head = f"<h2 id='response'>Response: {counts}</h2>{legend}"
    if not s.response_length:
        return f"{head}<p>No response ids (the episode ended before the policy's first turn).</p>"
    ids = s.response_ids
    blocks = []
    for trainable, start, end in s.mask_runs():
        n = end - start
        if trainable:
            pieces = token_pieces(ids[start:end], decode)
            lps = s.log_probs[start:end] if s.log_probs is not None else [None] * n
            body = "".join(_token_span(p, t, lp) for p, t, lp in zip(pieces, ids[start:end], lps, strict=True))
            tag = f"MODEL · trainable · {n} ids"
            blocks.append(f'<div class="model" title="{tag}"><span class="tag">{tag}</span>{body}</div>')
        else:
            tag = f"context · masked · {n} ids"
            text = escape(decode(list(ids[start:end])))
            blocks.append(f'<div class="ctx" title="{tag}"><span class="tag">{tag}</span>{text}</div>')
    return head + "".join(blocks)


def render_html(sample: ShownSample, decode: Decode, source: str, total: int) -> str:
    """The whole page for ``sample`` (sample ``sample.index`` of ``total`` in ``source``)."""
    meta = sample.metadata
    title = escape(f"slime-tau · task {task_key(meta)} · trial {meta.get('trial', '?')} · {sample.status}")
    body = "".join(
        [
            _header(sample, source, total),
            _error(meta),
            review_html(meta),
            _reward(meta),
            _prompt(sample, decode),
            _other_metadata(meta),
            _response(sample, decode),
        ]
    )
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
