"""What the built-in policy server says: oracle, scripted and echo policies (token ids in, ids out).

- ``OracleModel`` reads the conversation like a model would, recognises the task from the scripted
  user's opening message (instruction + ticket id), and replays the task's reference solution: each
  assistant-side gold action as a tool call in the configured format, each user-side action as a
  request to the user, then a final message carrying the task's expected outputs.
  With the scripted user it scores reward 1.0.
- ``ScriptedModel`` replays fixed texts turn by turn (fault injection: malformed calls, long replies).
- ``EchoModel`` answers every turn with one short message (load tests).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..envs.base import TaskScript
from ..errors import ConfigError
from ..templates import ChatTemplate
from ..users import scripted_opening
from .sglang_server import ModelOutput

ASK_USER = "Could you please do this on your side:"


def format_tool_call(name: str, arguments: dict[str, Any], fmt: str = "qwen25") -> str:
    """A tool call written the way a model using SGLang parser ``fmt`` writes it."""
    if fmt in ("qwen25", "qwen", "hermes"):
        payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return f"<tool_call>\n{payload}\n</tool_call>"
    raise ConfigError(f"the oracle cannot write tool calls in format {fmt!r}; supported: qwen25, qwen, hermes")


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


class OracleModel(_TextModel):
    """Replays reference solutions; recognises tasks by the scripted user's opening (which names the ticket)."""

    def __init__(self, tokenizer: Any, scripts: Sequence[TaskScript], tool_call_format: str = "qwen25") -> None:
        super().__init__(tokenizer)
        self._bot = format_tool_call("x", {}, tool_call_format).split("\n", 1)[0]  # also validates the format
        self.tool_call_format = tool_call_format
        # Longest first, so an opening that contains another task's wins; the bare instruction is the
        # fallback for users that do not name the ticket (the LLM user).
        openings = [(scripted_opening(s), s) for s in scripts if s.user_instructions]
        openings += [(s.user_instructions.strip(), s) for s in scripts if s.user_instructions.strip() and s.task_id]
        self.openings = sorted(openings, key=lambda pair: len(pair[0]), reverse=True)

    def reply(self, text: str) -> str:
        found = next(((opening, s) for opening, s in self.openings if opening in text), None)
        if found is None:
            return "I am sorry, I do not recognise this task."
        opening, script = found
        after = text[text.index(opening) + len(opening) :]
        step = after.count(self._bot) + after.count(ASK_USER)
        actions = script.gold_actions
        if step < len(actions):
            action = actions[step]
            if action.requestor == "user":
                return f"{ASK_USER} {action.name} {json.dumps(action.arguments, ensure_ascii=False)}"
            return format_tool_call(action.name, action.arguments, self.tool_call_format)
        if script.gold_outputs:
            return "Here is what I found: " + "; ".join(script.gold_outputs) + ". Is there anything else?"
        return "Everything you asked for is done. Is there anything else I can help you with?"


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
