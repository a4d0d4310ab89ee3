"""Stop a rollout whose first episodes are mostly parse errors: the policy writes another tool-call format.

A wrong ``--tool-call-parser`` against a served model (``llama3`` for a Qwen2.5 server) makes every tool call
an ``invalid`` action: the run would end with pass^1 0.000 and exit 0, and a training run with that setting
would learn nothing. :class:`EarlyParseCheck` looks at the first :data:`FIRST_EPISODES` episodes a run plays;
when more than half of their model turns were parse errors it raises :class:`ParserMismatchError`, one line
that names the family the replies are in (``engine/chat/tool_call_family.py``) and the command that fixes it.
"""

from __future__ import annotations

from typing import Any

from slime_tau_plugin.engine.errors import ConfigError

FIRST_EPISODES = 4
MAX_PARSE_ERROR_SHARE = 0.5


class ParserMismatchError(ConfigError):
    """Most model turns of the first episodes were parse errors (one CLI line, exit 2)."""


class EarlyParseCheck:
    """Fed each freshly played sample; raises once the first episodes are in and mostly parse errors."""

    def __init__(self, parser: str, planned: int, rerun: str) -> None:
        self.parser = parser
        self.wanted = min(FIRST_EPISODES, planned)
        self.rerun = rerun
        """How the message tells the user to run again (``--overwrite --out DIR``)."""
        self.seen: list[Any] = []

    def add(self, sample: Any) -> None:
        """Count ``sample`` if it is among the first episodes.

        Raises:
            ParserMismatchError: the first episodes are in and more than half their model turns were parse errors.
        """
        if len(self.seen) >= self.wanted:
            return
        self.seen.append(sample)
        if len(self.seen) < self.wanted:
            return
        turns = sum(int(s.metadata.get("num_turns") or 0) for s in self.seen)
        errors = sum(int(s.metadata.get("parse_errors") or 0) for s in self.seen)
        if not turns or errors <= MAX_PARSE_ERROR_SHARE * turns:
            return
        family = self._family()
        fix = (
            f"the replies are {family} tool calls: run again with --tool-call-parser {family} {self.rerun}"
            if family
            else "no SGLang parser reads the replies as calls of the episode's tools: check that the served model "
            f"calls tools and that --tool-call-parser is its family, then run again {self.rerun}"
        )
        raise ParserMismatchError(
            f"stopped: {errors} of the {turns} model turns of the first {len(self.seen)} episodes are parse errors "
            f"under --tool-call-parser {self.parser} (pass^k would be 0 and training would learn nothing); {fix}"
        )

    def _family(self) -> str | None:
        """The parser that reads the first foreign reply of the first episodes (their recorded messages)."""
        from slime_tau_plugin.engine.chat.tool_call_family import reply_family

        for sample in self.seen:
            tools = sample.metadata.get("tools") or []
            replies = [m for m in sample.metadata.get("messages") or () if m.get("role") == "assistant"]
            for message in replies[:3]:
                text = message.get("content") or ""
                if tools and text and (family := reply_family(text, tools, exclude=self.parser)):
                    return family
        return None
