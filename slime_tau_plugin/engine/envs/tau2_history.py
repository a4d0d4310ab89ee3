"""τ² tasks that begin mid-conversation: ``initial_state.message_history`` as the agent and the user saw it.

τ²'s orchestrator (``Orchestrator.initialize``) replays the history into the environment (``Tau2Domain``
does that here too) *and* hands it to both sides: the agent gets its assistant messages, the user's text
messages and the answers to its own tool calls; the user simulator gets its own messages (tool calls
included), the agent's text messages and the answers to its own tool calls, roles flipped (the simulator
is the ``assistant``). Who speaks first follows the history's last message. :func:`message_history` applies
those rules (``tests/engine/envs/test_message_history.py`` checks them against τ²'s orchestrator) and turns
τ²'s messages into chat messages: tool-call arguments as objects for the agent's chat template, as JSON text
for the user's OpenAI-compatible endpoint.
"""

from __future__ import annotations

import json
from typing import Any

from slime_tau_plugin.engine.envs.base import FirstMove, MessageHistory


def message_history(mods: dict[str, Any], task: Any, stop_markers: tuple[str, ...]) -> MessageHistory | None:
    """``task``'s history as each side saw it, or None when it starts from scratch.

    Raises:
        ValueError: a message is not an assistant, user or tool message, or is empty (τ² refuses it too).
    """
    state = task.initial_state
    history = list(state.message_history or []) if state is not None else []
    if not history:
        return None
    m = mods["data_model.message"]
    for msg in history:
        if not isinstance(msg, (m.AssistantMessage, m.UserMessage, m.ToolMessage)):
            raise ValueError(f"message_history holds a {type(msg).__name__}; expected assistant, user or tool messages")
        if not isinstance(msg, m.ToolMessage):
            msg.validate()
    names = {call.id: call.name for msg in history if not isinstance(msg, m.ToolMessage) for call in _calls(msg)}
    agent = [_agent_view(m, msg, names) for msg in history if _agent_sees(m, msg)]
    user = [_user_view(m, msg) for msg in history if _user_sees(m, msg)]
    return MessageHistory(tuple(agent), tuple(user), _first_move(m, history[-1], stop_markers))


def _agent_sees(m: Any, msg: Any) -> bool:
    """τ²'s ``is_valid_agent_history_message``."""
    if isinstance(msg, m.ToolMessage):
        return msg.requestor == "assistant"
    return isinstance(msg, m.AssistantMessage) or not msg.is_tool_call()


def _user_sees(m: Any, msg: Any) -> bool:
    """τ²'s ``is_valid_user_history_message``."""
    if isinstance(msg, m.ToolMessage):
        return msg.requestor == "user"
    return isinstance(msg, m.UserMessage) or not msg.is_tool_call()


def _first_move(m: Any, last: Any, stop_markers: tuple[str, ...]) -> FirstMove:
    """τ²'s rule: an agent's text or the answer to the user's own call -> the user; a user's text or the answer
    to the agent's call -> the agent; a user's stop -> the end (a trailing call without its answer never gets
    here: replaying the history refuses it)."""
    if isinstance(last, m.ToolMessage):
        return FirstMove.USER if last.requestor == "user" else FirstMove.AGENT
    if isinstance(last, m.AssistantMessage):
        return FirstMove.USER
    if any(marker in (last.content or "") for marker in stop_markers):
        return FirstMove.USER_STOPPED
    return FirstMove.AGENT


def _agent_view(m: Any, msg: Any, names: dict[str, str]) -> dict[str, Any]:
    if isinstance(msg, m.ToolMessage):
        return {"role": "tool", "tool_call_id": msg.id, "name": names.get(msg.id, ""), "content": msg.content or ""}
    out: dict[str, Any] = {"role": msg.role, "content": msg.content or ""}
    if msg.is_tool_call():
        out["tool_calls"] = [_call(c, arguments=dict(c.arguments)) for c in msg.tool_calls]
    return out


def _user_view(m: Any, msg: Any) -> dict[str, Any]:
    """τ²'s ``UserState.flip_roles`` in OpenAI's wire format."""
    if isinstance(msg, m.ToolMessage):
        return {"role": "tool", "tool_call_id": msg.id, "content": msg.content or ""}
    if isinstance(msg, m.AssistantMessage):
        return {"role": "user", "content": msg.content or ""}
    if msg.is_tool_call():
        calls = [_call(c, arguments=json.dumps(c.arguments)) for c in msg.tool_calls]
        return {"role": "assistant", "content": msg.content, "tool_calls": calls}
    return {"role": "assistant", "content": msg.content or ""}


def _calls(msg: Any) -> list[Any]:
    return list(msg.tool_calls or [])


def _call(call: Any, *, arguments: Any) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
