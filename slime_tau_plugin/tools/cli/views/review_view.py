"""How ``show``, its HTML page and the run summary mark the customer message the review flagged.

Reads ``metadata["tau_review"]`` (``engine/review/verdict.py``) and, when the run recorded them, the messages, so
a person sees the flagged customer message itself next to what the review said about it.
"""

from __future__ import annotations

from html import escape
from typing import Any

from slime_tau_plugin.engine.review.metrics import REVIEW_KEY

__all__ = ["review_html", "review_lines", "review_summary_line"]

EXCERPT = 200


def _flagged(meta: dict[str, Any]) -> list[tuple[dict[str, Any], str | None]]:
    """Each finding and the text of the customer message it points at (None when messages were not recorded)."""
    review = meta.get(REVIEW_KEY)
    if not isinstance(review, dict):
        return []
    messages = meta.get("messages") if isinstance(meta.get("messages"), list) else []
    out = []
    for finding in review.get("findings") or []:
        index = finding.get("message_index")
        text = None
        if isinstance(index, int) and 0 <= index < len(messages) and isinstance(messages[index], dict):
            text = str(messages[index].get("content") or "")
        out.append((finding, text))
    return out


def _headline(meta: dict[str, Any]) -> str | None:
    review = meta.get(REVIEW_KEY)
    if not isinstance(review, dict) or not review.get("findings"):
        return None
    outcome = "taken out of training (user_error)" if review.get("excluded") else "kept"
    return f"customer review: {review.get('severity')}, {outcome}"


def review_lines(meta: dict[str, Any]) -> list[str]:
    """``show``'s text lines: the verdict, then ``>> message N`` with the flagged customer message."""
    head = _headline(meta)
    if head is None:
        return []
    lines = [head]
    for finding, text in _flagged(meta):
        tags = ",".join(finding.get("tags") or [])
        lines.append(
            f"  >> message {finding.get('message_index')} [{finding.get('check')}; {tags}; "
            f"{finding.get('severity')}]: {finding.get('detail')}"
        )
        if text is not None:
            lines.append(f"     customer said: {' '.join(text.split())[:EXCERPT]!r}")
    return lines


def review_html(meta: dict[str, Any]) -> str:
    """The HTML page's section: each finding with the flagged message in a highlighted block."""
    head = _headline(meta)
    if head is None:
        return ""
    rows = []
    for finding, text in _flagged(meta):
        tags = ", ".join(finding.get("tags") or [])
        said = f"<pre class='flagged'>{escape(text)}</pre>" if text is not None else ""
        rows.append(
            f"<li><b>message {escape(str(finding.get('message_index')))}</b> · {escape(str(finding.get('check')))} · "
            f"{escape(tags)} · {escape(str(finding.get('severity')))}<br>{escape(str(finding.get('detail')))}"
            f"{said}</li>"
        )
    style = "<style>.flagged{border-left:4px solid #c0392b;background:#fdecea;padding:4px}</style>"
    return f"{style}<section class='review'><h2>{escape(head)}</h2><ul>{''.join(rows)}</ul></section>"


def review_summary_line(domain: dict[str, Any]) -> str | None:
    """The run summary's line: episodes the customer decided (left out of pass^k) and minor findings."""
    excluded = int(domain.get("review/excluded", 0) or 0)
    flagged = round(float(domain.get("review/flagged", 0.0) or 0.0) * int(domain.get("samples", 0) or 0))
    if not flagged:
        return None
    tags = [k.split("/")[-1] for k, v in domain.items() if k.startswith("review/tag/") and v]
    return (
        f"  customer review: {flagged} episodes flagged ({', '.join(tags)}), {excluded} taken out as user_error "
        "(FAILED, not counted in pass^k)"
    )
