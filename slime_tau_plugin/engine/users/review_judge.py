"""τ²'s user-only review rubric through our judge client, for a share of episodes (``tau_review_judge_share``).

The contract is τ²'s (upstream ``tau2/evaluator/review_llm_judge_user_only.py``): the judge reads the customer's
guidelines, its instructions and the conversation as the customer saw it, and answers JSON
``{"errors": [{"turn_idx", "error_tags", "severity", "reasoning", "user_message", "correct_behavior"}], "summary"}``
with τ²'s tags and severities. Where upstream τ² is importable its own prompts and parser are used; otherwise the
rubric below says the same in our words. ``turn_idx`` is the number each message carries in the conversation we
send, which is its index in the episode's messages, so a judge finding points at a message like a check's does.

The request runs on the event loop like the LLM user's (our async ``ChatClient``: retries, replicas), bounded by
the judge's timeout and by what is left of the episode's deadline, in a context of its own (no episode retry budget,
no user-token budget) whose requests, tokens and wait count into the episode's judge meter (``CustomerCost.judge``). A
failed or unreadable answer is a judge failure: recorded in the verdict (``judge_error``) and counted
(``review/judge_failed``), never read as a clean customer.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import json
import re
import time
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slime_tau_plugin.engine.errors import TauPluginError
from slime_tau_plugin.engine.net.endpoints import EndpointRole
from slime_tau_plugin.engine.net.stats import NetStats, current_stats, episode_stats
from slime_tau_plugin.engine.review.verdict import Finding, ReviewCheck, ReviewTag, Severity
from slime_tau_plugin.engine.users.chat_client import ChatClient

if TYPE_CHECKING:
    from slime_tau_plugin.engine.config.tau_config import TauConfig

__all__ = ["JudgeReviewer", "is_selected", "parse_answer", "review_judge"]

UPSTREAM = "tau2.evaluator.review_llm_judge_user_only"
RUBRIC = """You review a simulated customer, not the agent. The customer was given the guidelines and the
instructions below. Find every customer message that breaks them: a fact (name, email, zip code, id, amount, item
option) not in or derivable from the instructions (hallucination), a misreading of the agent
(incorrect_interpretation), a message against the guidelines or instructions (guideline_violation), information
shared before it was appropriate (revealed_info_early), a contradiction of its earlier words (inconsistent_behavior),
ending while the agent was making progress (premature_termination), a required action not taken
(missed_required_action), actions out of order (wrong_sequence), anything else (other). Do not blame the customer for
the agent's failures. Severity: critical_helped (the error made the task easier than it is), critical_hindered (it
made the task harder or impossible), minor (it did not change the outcome).

<User Simulator Guidelines>
{user_guidelines}
</User Simulator Guidelines>

Answer only JSON: {{"errors": [{{"turn_idx": <the message's number>, "error_tags": [<tags>], "severity":
"minor" | "critical_helped" | "critical_hindered", "reasoning": "...", "user_message": "...",
"correct_behavior": "..."}}], "summary": "..."}}"""
REQUEST = (
    "<User Instructions>\n{user_instructions}\n</User Instructions>\n\n<Conversation>\n{conversation}\n</Conversation>"
)
_CALL = re.compile(r"<tool_call>.*?</tool_call>", re.S)


def is_selected(share: float, episode_key: str) -> bool:
    """Whether this episode is judged: a stable draw from its key, so a replay asks the same episodes."""
    return share > 0 and (zlib.crc32(episode_key.encode()) / 2**32) < share


def conversation_text(messages: Sequence[dict[str, Any]], first_index: int, stop: str | None = None) -> str:
    """The conversation as the customer saw it, each message with its index: agent text without tool calls; the
    customer's stop (never shown to the agent, so not in ``messages``) last, numbered ``len(messages)``, as τ²'s
    judge sees it in the trajectory."""
    lines = []
    for i, m in enumerate(messages):
        if i < first_index and m.get("role") != "user":
            continue
        text = str(m.get("content") or "")
        if m.get("role") == "user":
            lines.append(f"[{i}] User: {text}")
        elif m.get("role") == "assistant":
            said = _CALL.sub("", text).strip()
            if said:
                lines.append(f"[{i}] Agent: {said}")
    if stop is not None:
        lines.append(f"[{len(messages)}] User: {stop}")
    return "\n".join(lines)


def parse_answer(text: str, customer_indices: Sequence[int]) -> list[Finding]:
    """The judge's JSON as findings (τ²'s schema); an unknown tag is ``other``.

    Raises:
        ValueError: the answer is not that JSON, or a finding names no customer message or a bad severity.
    """
    start, end = text.find("{"), text.rfind("}")
    data = json.loads(text[start : end + 1]) if start >= 0 < end else None
    if not isinstance(data, dict) or not isinstance(data.get("errors"), list):
        raise ValueError(f"the judge's answer is not τ²'s review JSON: {text[:200]!r}")
    findings = []
    for error in data["errors"]:
        index, severity = error.get("turn_idx"), error.get("severity")
        if not isinstance(index, int) or index not in customer_indices:
            raise ValueError(f"the judge's turn_idx {index!r} is not a customer message")
        if severity not in {s.value for s in Severity}:
            raise ValueError(f"the judge's severity {severity!r} is not one of τ²'s")
        raw = error.get("error_tags") or []
        names = [raw] if isinstance(raw, str) else list(raw)
        known = {t.value for t in ReviewTag}
        tags = tuple(dict.fromkeys(ReviewTag(t) if t in known else ReviewTag.OTHER for t in names))
        detail = " ".join(str(error.get("reasoning") or "").split())[:300]
        findings.append(Finding(ReviewCheck.JUDGE, tags or (ReviewTag.OTHER,), Severity(severity), index, detail))
    return findings


class JudgeReviewer:
    """Asks the judge endpoint for τ²'s user review of one conversation."""

    def __init__(self, client: ChatClient, timeout_s: float) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self.system, self.request = _prompts()

    async def review(
        self,
        guidelines: str,
        instructions: str,
        messages: Sequence[dict[str, Any]],
        first_index: int,
        deadline: float | None,
        stop: str | None = None,
    ) -> tuple[list[Finding], str | None]:
        """The judge's findings, or ``([], why)`` when it failed (never an exception); ``stop``: the customer's
        last words when it ended the episode (a premature stop is the judge's to see too)."""
        left = self.timeout_s if deadline is None else min(self.timeout_s, deadline - time.monotonic())
        if left <= 0:
            return [], "the episode's deadline passed before the judge could be asked"
        customer = [i for i, m in enumerate(messages) if i >= first_index and m.get("role") == "user"]
        customer += [len(messages)] if stop is not None else []
        prompt = [
            {"role": "system", "content": self.system.format(user_guidelines=guidelines or "(none given)")},
            {
                "role": "user",
                "content": self.request.format(
                    user_instructions=instructions, conversation=conversation_text(messages, first_index, stop)
                ),
            },
        ]
        # a context of its own: the judge's tokens are not the customer's, but its meter is the episode's
        episode = current_stats()
        own = NetStats(judge_chat=episode.judge_chat) if episode is not None else NetStats()
        call = asyncio.create_task(self._ask(prompt, own), context=contextvars.Context())
        try:
            answer = await asyncio.wait_for(call, left)
            return parse_answer(str(answer.get("content") or ""), customer), None
        except TimeoutError:
            return [], f"the judge did not answer within {left:.1f} s (judge timeout or the episode's deadline)"
        except (TauPluginError, ValueError) as exc:
            return [], f"{type(exc).__name__}: {exc}"

    async def _ask(self, prompt: list[dict[str, Any]], stats: NetStats) -> dict:
        with episode_stats(stats):
            return await self.client.complete(prompt)


def review_judge(config: TauConfig) -> JudgeReviewer | None:
    """The process's judge reviewer for ``config``; None when no share of episodes is judged."""
    endpoint = config.judge_endpoint()
    if config.review_judge_share <= 0 or endpoint is None:
        return None
    client = ChatClient(endpoint, what="user-review judge", role=EndpointRole.JUDGE)
    return JudgeReviewer(client, endpoint.timeout_s)


def _prompts() -> tuple[str, str]:
    """τ²'s own system and user prompts where upstream τ² is importable, else our rubric (same contract)."""
    try:
        upstream = importlib.import_module(UPSTREAM)
        return str(upstream.SYSTEM_PROMPT), str(upstream.USER_PROMPT)
    except (ImportError, AttributeError):
        return RUBRIC, REQUEST
