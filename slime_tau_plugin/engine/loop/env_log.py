"""The ordered log of an episode's environment calls, and its replay on a fresh environment.

A τ environment is a live database; a suspended episode keeps, instead, every call that changed or read it
(agent tools, user tools, recorded messages) with the answer it got. :class:`RecordingSession` wraps the
episode's :class:`EnvSession` and writes that log as the episode plays; :func:`replay` runs the log on a
fresh session for the same task and checks, call by call, that τ answers the same, then that the records the
episode touched hash the same (``EnvSession.state_hash``). Any difference is a :class:`ResumeError` naming
the call: a resumed episode plays on in the world it left, or not at all. Synchronous, like ``EnvSession``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slime_tau_plugin.engine.envs.base import EnvSession, EnvToolCall, StepResult
from slime_tau_plugin.engine.episode.state import ActionKind, LoggedAction
from slime_tau_plugin.engine.errors import ResumeError


class RecordingSession:
    """An :class:`EnvSession` that logs each call it forwards (everything else is the wrapped session's)."""

    def __init__(self, inner: EnvSession, log: Sequence[LoggedAction] = ()) -> None:
        self.inner = inner
        self.log: list[LoggedAction] = list(log)

    def __getattr__(self, name: str) -> Any:  # tools, prompts, script, reward, is_read_only...
        return getattr(self.inner, name)

    def step(self, call: EnvToolCall) -> StepResult:
        return self._logged(ActionKind.AGENT, call, self.inner.step(call))

    def user_step(self, call: EnvToolCall) -> StepResult:
        return self._logged(ActionKind.USER, call, self.inner.user_step(call))

    def record_message(self, role: str, content: str) -> None:
        self.inner.record_message(role, content)
        self.log.append(LoggedAction(kind=ActionKind.MESSAGE, name=role, arguments={"content": content}))

    def _logged(self, kind: ActionKind, call: EnvToolCall, result: StepResult) -> StepResult:
        self.log.append(
            LoggedAction(
                kind=kind,
                name=call.name,
                arguments=dict(call.arguments),
                call_id=call.call_id,
                content=result.content,
                is_error=result.is_error,
                is_done=result.is_done,
            )
        )
        return result


def replay(session: EnvSession, actions: Sequence[LoggedAction], expected_hash: str) -> RecordingSession:
    """Run ``actions`` on a fresh ``session``, checking each answer and then the touched records' hash.

    Returns the session wrapped to go on logging, its log already holding ``actions``.

    Raises:
        ResumeError: an answer or the final hash differs (names the call, or both hashes).
    """
    for number, action in enumerate(actions, start=1):
        if action.kind is ActionKind.MESSAGE:
            session.record_message(action.name, str(action.arguments.get("content", "")))
            continue
        call = EnvToolCall(action.name, dict(action.arguments), action.call_id)
        run = session.step if action.kind is ActionKind.AGENT else session.user_step
        result = run(call)
        got = (result.content, result.is_error, result.is_done)
        if got != (action.content, action.is_error, action.is_done):
            raise ResumeError(
                f"resume: replaying call {number} of {len(actions)} ({action.kind.value} tool {action.name}) gave "
                f"a different answer: logged {action.content[:120]!r}, now {result.content[:120]!r}"
            )
    now = session.state_hash()
    if now != expected_hash:
        raise ResumeError(
            f"resume: after replaying {len(actions)} environment calls the database hash is {now}, "
            f"the suspended episode's was {expected_hash}"
        )
    return RecordingSession(session, actions)
