"""What the built-in policy server says: oracle, scripted and echo policies (token ids in, ids out).

- ``OracleModel`` reads the conversation like a model would, recognises the task from the user's opening
  message and, where tasks share it, from what the tools and the user answered so far (``oracle_tasks``),
  and replays the task's reference solution: each assistant-side gold action as a tool call in the configured
  format (``tool_call_formats``), each user-side action as a request to the user, then a final message
  carrying the task's expected outputs. With the scripted user it scores reward 1.0.
- ``ScriptedModel`` replays fixed texts turn by turn (fault injection: malformed calls, long replies).
- ``EchoModel`` answers every turn with one short message (load tests).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.envs.base import TaskScript
from slime_tau_plugin.engine.loop.blocking import prepare_for_threads
from slime_tau_plugin.tools.servers.oracle_tasks import KnownTask, Move, MoveKind, ScriptIndex, TaskGroup
from slime_tau_plugin.tools.servers.sglang_server import ModelOutput
from slime_tau_plugin.tools.servers.tool_call_formats import format_tool_call, get_format

__all__ = ["ASK_USER", "EchoModel", "KnownTask", "OracleModel", "ScriptIndex", "ScriptedModel", "format_tool_call"]

ASK_USER = "Could you please do this on your side:"
THOUGHT = "I know this task; the next step follows."
"""The reasoning a fake model writes when the generation prompt opened it (Qwen3.5/3.6: ``<think>\\n``; DeepSeek V4:
``<think>``)."""
NEXT_STEP = "the next step of the fix you know of."
"""What the oracle asks for when the tasks it cannot yet tell apart need different user actions."""


class _TextModel:
    """Shared plumbing: decode the input, produce text, encode it and close the turn."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.template = ChatTemplate(tokenizer)
        probe = [{"role": "user", "content": "U"}]
        with_prompt = self.template.render(probe, add_generation_prompt=True)
        self.generation_prompt = with_prompt[len(self.template.render(probe, add_generation_prompt=False)) :]

    def generate(self, input_ids: Sequence[int], sampling_params: dict[str, Any]) -> ModelOutput:
        """The turn's reply; when the input ends inside an assistant turn (one cut by an abort), the rest of it."""
        ids = list(input_ids)
        text = self.tokenizer.decode(ids, skip_special_tokens=False)
        cut = text.rfind(self.generation_prompt)
        started = "" if cut < 0 else text[cut + len(self.generation_prompt) :]
        if started:  # a turn cut mid-generation ends the input only if all that follows the prompt is its start
            turn = self._turn_ids(text[: cut + len(self.generation_prompt)])
            done = next((k for k in range(min(len(turn) - 1, len(ids)), 0, -1) if ids[-k:] == turn[:k]), 0)
            if done and self.tokenizer.decode(ids[-done:], skip_special_tokens=False) == started:
                return ModelOutput(tuple(turn[done:]), start=done)
        return ModelOutput(tuple(self._turn_ids(text)))

    def _turn_ids(self, text: str) -> list[int]:
        reply = self.reply(text)
        if text.endswith("<think>\n"):  # the prompt opened the reasoning: close it, as a thinking model does
            reply = f"{THOUGHT}\n</think>\n\n{reply}"
        elif text.endswith("<think>"):  # DeepSeek V4's <｜Assistant｜><think>: the answer follows </think> at once
            reply = f"{THOUGHT}</think>{reply}"
        return self.template.encode(reply) + self.template.eot_ids

    def turn_index(self, text: str) -> int:
        """How many assistant turns the conversation already has."""
        return max(0, text.count(self.generation_prompt) - 1)

    def reply(self, text: str) -> str:
        raise NotImplementedError


class OracleModel(_TextModel):
    """Replays reference solutions; recognises tasks by the user's opening and what the conversation answered.

    ``scripts`` may be a function that loads them: the index is then built in a background thread (every
    τ² task takes seconds to load), so the server answers ``/health`` at once and the first requests wait.
    """

    def __init__(
        self,
        tokenizer: Any,
        scripts: Iterable[TaskScript | KnownTask] | ScriptIndex | Callable[[], Iterable[TaskScript | KnownTask]],
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

    def _build(self, load: Callable[[], Iterable[TaskScript | KnownTask]]) -> None:
        try:
            self._index = ScriptIndex(load())
        except Exception as exc:  # reported by every request through ``index``
            self._error = exc
        finally:
            self._ready.set()

    def find(self, text: str) -> tuple[int, TaskGroup] | None:
        """The tasks whose instruction is the first user message of ``text``, and the offset where it ends.

        A task that begins mid-conversation (τ² ``message_history``) opens with its history: the scripted user's
        instruction comes after it, so any known instruction in the text counts there.
        """
        if self._user_turn is None:
            return self.index.within(text)
        header, footer = self._user_turn
        start = text.find(header)
        if start < 0:
            return None
        start += len(header)
        end = text.find(footer, start)
        end = len(text) if end < 0 else end
        group = self.index.by_instruction.get(text[start:end].strip())
        return self.index.within(text) if group is None else (end, group)

    def reply(self, text: str) -> str:
        found = self.find(text)
        if found is None:
            return "I am sorry, I do not recognise this task."
        end, group = found
        after = text[end:]
        calls = after.count(self._bot)
        return self.say(group.move(after, calls + after.count(ASK_USER)), calls)

    def say(self, move: Move, calls: int) -> str:
        """The text of ``move``; ``calls`` tool calls came before it (formats number their ids)."""
        action = move.action
        if move.kind is MoveKind.ASK:
            return f"{ASK_USER} {NEXT_STEP}"
        if action is not None and action.requestor == "user":
            return f"{ASK_USER} {action.name} {json.dumps(action.arguments, ensure_ascii=False)}"
        if action is not None:
            return self.format.write(action.name, action.arguments, calls)
        if move.outputs:
            return "Here is what I found: " + "; ".join(move.outputs) + ". Is there anything else?"
        return "Everything you asked for is done. Is there anything else I can help you with?"

    def _user_turn_markers(self) -> tuple[str, str] | None:
        """The text the template writes right before and after a user message that follows the system one.

        ``None`` when the template does not keep the user message apart (then any known instruction in the text counts).
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
