"""What the built-in policy server says: oracle, scripted and echo policies (token ids in, ids out).

- ``OracleModel`` reads the conversation like a model would, recognises the task from the scripted
  user's opening message (instruction + ticket id), and replays the task's reference solution: each
  assistant-side gold action as a tool call in the configured format (``tool_call_formats``), each user-side action as a
  request to the user, then a final message carrying the task's expected outputs.
  With the scripted user it scores reward 1.0.
- ``ScriptedModel`` replays fixed texts turn by turn (fault injection: malformed calls, long replies).
- ``EchoModel`` answers every turn with one short message (load tests).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from slime_tau_plugin.engine.blocking import prepare_for_threads
from slime_tau_plugin.engine.envs.base import TaskScript
from slime_tau_plugin.engine.templates import ChatTemplate
from slime_tau_plugin.engine.users import scripted_opening
from slime_tau_plugin.tools.servers.sglang_server import ModelOutput
from slime_tau_plugin.tools.servers.tool_call_formats import format_tool_call, get_format

__all__ = ["ASK_USER", "EchoModel", "OracleModel", "ScriptIndex", "ScriptedModel", "format_tool_call"]

ASK_USER = "Could you please do this on your side:"
_TICKET = "(Ticket: "
"""How the scripted user's ticket line starts (``users.scripted_opening``)."""


class _TextModel:
    """Shared plumbing: decode the input, produce text, encode it and close the turn."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.template = ChatTemplate(tokenizer)
        probe = [{"role": "user", "content": "U"}]
        with_prompt = self.template.render(probe, add_generation_prompt=True)
        self.generation_prompt = with_prompt[len(self.template.render(probe, add_generation_prompt=False)) :]

    def generate(self, input_ids: Sequence[int], sampling_params: dict[str, Any]) -> ModelOutput:
        text = self.tokenizer.decode(list(input_ids), skip_special_tokens=False)
        reply = self.reply(text)
        return ModelOutput(tuple(self.template.encode(reply) + self.template.eot_ids))

    def turn_index(self, text: str) -> int:
        """How many assistant turns the conversation already has."""
        return max(0, text.count(self.generation_prompt) - 1)

    def reply(self, text: str) -> str:
        raise NotImplementedError


class ScriptIndex:
    """The reference solutions the oracle knows, found from a conversation in O(1) scripts per request.

    The scripted user ends its opening with a ``(Ticket: ID)`` line (``users.scripted_opening``): the id
    picks the few scripts with that ticket (ids repeat across domains, and τ-bench v1 numbers each split
    from 0), and the full opening confirms one. Users that do not name a ticket (the LLM user) open with
    the bare instruction, looked up as the first user message's exact text.
    """

    def __init__(self, scripts: Iterable[TaskScript]) -> None:
        self.by_ticket: dict[str, list[tuple[str, TaskScript]]] = {}
        """Ticket id -> (scripted opening, script), in the order given."""
        self.by_instruction: dict[str, TaskScript] = {}
        """Stripped instruction -> the first script with it (many telecom tasks share one instruction)."""
        self.size = 0
        for script in scripts:
            instruction = script.user_instructions.strip()
            if not instruction:
                continue
            self.size += 1
            if script.task_id:
                self.by_ticket.setdefault(script.task_id, []).append((scripted_opening(script), script))
            self.by_instruction.setdefault(instruction, script)

    def by_ticket_line(self, text: str) -> tuple[int, TaskScript] | None:
        """The script whose ticket line and whole opening appear in ``text``, and where that opening ends."""
        start = text.find(_TICKET)
        while start >= 0:
            line_end = text.find("\n", start)
            line_end = len(text) if line_end < 0 else line_end
            rest = text[start + len(_TICKET) : line_end]
            close = rest.find(")")
            while close >= 0:  # the id ends at one of the line's ")" (the template may add text after it)
                for opening, script in self.by_ticket.get(rest[:close], ()):
                    at = text.find(opening)
                    if at >= 0:
                        return at + len(opening), script
                close = rest.find(")", close + 1)
            start = text.find(_TICKET, line_end)
        return None


class OracleModel(_TextModel):
    """Replays reference solutions; recognises tasks by the scripted user's opening (which names the ticket).

    ``scripts`` may be a function that loads them: the index is then built in a background thread (every
    τ² task takes seconds to load), so the server answers ``/health`` at once and the first requests wait.
    """

    def __init__(
        self,
        tokenizer: Any,
        scripts: Iterable[TaskScript] | ScriptIndex | Callable[[], Iterable[TaskScript]],
        tool_call_format: str = "qwen25",
    ) -> None:
        super().__init__(tokenizer)
        self.format = get_format(tool_call_format)  # refuses an unknown format before any request
        self._bot = self.format.start
        self._user_turn = self._user_turn_markers()
        self._index: ScriptIndex | None = None
        self._error: Exception | None = None
        self._ready = threading.Event()
        if callable(scripts):
            prepare_for_threads()
            threading.Thread(target=self._build, args=(scripts,), name="oracle-index", daemon=True).start()
        else:
            self._index = scripts if isinstance(scripts, ScriptIndex) else ScriptIndex(scripts)
            self._ready.set()

    @property
    def index(self) -> ScriptIndex:
        """The task index, once built (waits while a background build runs).

        Raises:
            RuntimeError: the background build failed (the cause is chained).
        """
        self._ready.wait()
        if self._index is None:
            raise RuntimeError(f"the oracle could not load its tasks: {self._error!r}") from self._error
        return self._index

    def _build(self, load: Callable[[], Iterable[TaskScript]]) -> None:
        try:
            self._index = ScriptIndex(load())
        except Exception as exc:  # reported by every request through ``index``
            self._error = exc
        finally:
            self._ready.set()

    def find(self, text: str) -> tuple[int, TaskScript] | None:
        """The task ``text`` is about (by ticket line, else by the first user message's instruction) and
        the offset where the user's opening ends."""
        found = self.index.by_ticket_line(text)
        if found is not None or self._user_turn is None:
            return found
        header, footer = self._user_turn
        start = text.find(header)
        if start < 0:
            return None
        start += len(header)
        end = text.find(footer, start)
        end = len(text) if end < 0 else end
        script = self.index.by_instruction.get(text[start:end].strip())
        return None if script is None else (end, script)

    def reply(self, text: str) -> str:
        found = self.find(text)
        if found is None:
            return "I am sorry, I do not recognise this task."
        end, script = found
        after = text[end:]
        calls = after.count(self._bot)
        step = calls + after.count(ASK_USER)
        actions = script.gold_actions
        if step < len(actions):
            action = actions[step]
            if action.requestor == "user":
                return f"{ASK_USER} {action.name} {json.dumps(action.arguments, ensure_ascii=False)}"
            return self.format.write(action.name, action.arguments, calls)
        if script.gold_outputs:
            return "Here is what I found: " + "; ".join(script.gold_outputs) + ". Is there anything else?"
        return "Everything you asked for is done. Is there anything else I can help you with?"

    def _user_turn_markers(self) -> tuple[str, str] | None:
        """The text the template writes right before and after a user message that follows the system one.

        ``None`` when the template does not keep the user message apart (then only tickets identify tasks).
        """
        system, user = "\x01SYSTEM-PROBE\x01", "\x01USER-PROBE\x01"
        probe = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        text = self.template.render(probe, add_generation_prompt=False)
        if system not in text or user not in text or text.index(system) > text.index(user):
            return None
        header = text[text.index(system) + len(system) : text.index(user)]
        footer = text[text.index(user) + len(user) :].strip()
        if footer.startswith(self.template.eot_text):
            footer = self.template.eot_text
        return (header, footer) if header.strip() and footer else None


class ScriptedModel(_TextModel):
    """Says ``texts[k]`` on the k-th assistant turn of each conversation (the last one repeats)."""

    def __init__(self, tokenizer: Any, texts: Sequence[str] | Callable[[int, str], str]) -> None:
        super().__init__(tokenizer)
        self.texts = texts

    def reply(self, text: str) -> str:
        turn = self.turn_index(text)
        if callable(self.texts):
            return self.texts(turn, text)
        return self.texts[min(turn, len(self.texts) - 1)]


class EchoModel(_TextModel):
    """Always answers with one short message (exercises the loop without tools)."""

    def reply(self, text: str) -> str:
        return f"Thank you. I have read {len(text)} characters of our conversation."
