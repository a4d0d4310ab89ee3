"""How the built-in oracle knows which task it plays, from the conversation alone.

The oracle loads τ's task list itself. The first user message is the task's instruction: where no
other task shares it, that is the task. τ² telecom's tasks share 15 instructions among 2285 tasks and
differ only in the phone's and the line's initial state, which a support agent finds out by asking.
So does the oracle: it replays each candidate's reference solution in a τ environment of its own and
walks a decision tree whose nodes say what to do next and whose edges are what the tools or the user
answered (found, verbatim, in the prompt):

- every candidate's next reference action is the same: do it (its answer may split the candidates);
- they differ but all are the user's (or the end, with nothing to tell): ask the user for the next step
  (the scripted user carries out its own task's next action, and says which);
- otherwise a probe: a read-only tool call whose answer differs between candidates: the agent's
  (``get_data_usage``) or a check the user runs when asked (``check_sim_status``);
- all candidates done: the final message.

Tasks given without a ``TaskRef`` (bare scripts in tests) cannot be replayed: the first of them wins.
Imports τ only through ``engine.envs`` backends; knows nothing of HTTP or tokens (``fake_models`` does).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from slime_tau_plugin.engine.envs import get_backend
from slime_tau_plugin.engine.envs.base import EnvSession, EnvToolCall, GoldAction, StepResult, TaskScript
from slime_tau_plugin.engine.episode.task_ref import TaskRef

__all__ = ["KnownTask", "Move", "MoveKind", "ScriptIndex", "TaskGroup"]

MAX_PROBES_PER_TOOL = 64
"""Argument combinations tried per read-only tool when looking for a probe (keeps a node's cost bounded)."""


@dataclass(frozen=True, slots=True)
class KnownTask:
    """A task the oracle knows: its reference solution and where τ keeps it (to replay it)."""

    script: TaskScript
    ref: TaskRef | None = None
    """None: it cannot be replayed, so it is found by its instruction alone."""


class MoveKind(str, Enum):
    """What the oracle does next."""

    GOLD = "gold"
    """The reference action ``Move.action`` (a tool call, or a request to the user when it is the user's)."""
    ASK = "ask"
    """Ask the user for their next step (candidates disagree on which it is)."""
    PROBE = "probe"
    """The read-only call ``Move.action`` (the user's when its requestor is): its answer tells candidates apart."""
    FINAL = "final"
    """Say goodbye, telling the user ``Move.outputs``."""


@dataclass(frozen=True, slots=True)
class Move:
    """The oracle's next turn."""

    kind: MoveKind
    action: GoldAction | None = None
    outputs: tuple[str, ...] = ()


def script_move(script: TaskScript, step: int) -> Move:
    """Move ``step`` of one known task: its reference actions in order, then the final message."""
    if step < len(script.gold_actions):
        return Move(MoveKind.GOLD, script.gold_actions[step])
    return Move(MoveKind.FINAL, outputs=script.gold_outputs)


class _Replay:
    """One candidate's reference solution, replayed in its own environment as far as its node needs."""

    def __init__(self, task: KnownTask) -> None:
        self.task = task
        self.done = 0
        """Reference actions applied so far (every candidate of a node has applied ``node.step``)."""
        self._session: EnvSession | None = None

    @property
    def actions(self) -> tuple[GoldAction, ...]:
        return self.task.script.gold_actions

    def session(self) -> EnvSession:
        if self._session is None:
            assert self.task.ref is not None  # only replayable tasks get a _Replay
            self._session = get_backend(self.task.ref.benchmark).open(self.task.ref)
        return self._session

    def next_key(self, step: int) -> tuple[str, ...]:
        """What this candidate does at ``step``: its action (name, arguments, side), or the end."""
        if step >= len(self.actions):
            return ("end", *self.task.script.gold_outputs)
        action = self.actions[step]
        return (action.requestor, action.name, repr(sorted(action.arguments.items())))

    def run(self, action: GoldAction) -> StepResult:
        call = EnvToolCall(action.name, dict(action.arguments), f"oracle-{self.done}")
        session = self.session()
        return session.user_step(call) if action.requestor == "user" else session.step(call)

    def advance(self) -> str:
        """Apply the next reference action; what it answered."""
        result = self.run(self.actions[self.done])
        self.done += 1
        return result.content


@dataclass(slots=True)
class _Node:
    """Candidates that the conversation so far cannot tell apart, at reference step ``step``."""

    step: int
    replays: list[_Replay]
    move: Move | None = None
    children: dict[str, _Node] = field(default_factory=dict)
    """What the move's tool or user answered -> the candidates that answer leaves."""


class TaskGroup:
    """The known tasks that share one instruction, and the decision tree that tells them apart."""

    def __init__(self, tasks: list[KnownTask]) -> None:
        self.tasks = tasks
        replayable = [_Replay(t) for t in tasks if t.ref is not None]
        self._root = _Node(0, replayable) if len(replayable) > 1 else None
        self._lock = threading.Lock()

    def move(self, conversation: str, moves_done: int) -> Move:
        """The next move, given the conversation after the opening and how many moves it already holds."""
        if self._root is None:
            return script_move(self.tasks[0].script, moves_done)
        with self._lock:  # expanding a node replays τ environments: one request at a time
            node, pos = self._root, 0
            for depth in range(moves_done):
                if len(node.replays) == 1:
                    return script_move(node.replays[0].task.script, node.step + moves_done - depth)
                self._expand(node)
                if not node.children:
                    break
                node, pos = _follow(node, conversation, pos)
            if len(node.replays) == 1:
                return script_move(node.replays[0].task.script, node.step)
            self._expand(node)
            assert node.move is not None
            return node.move

    def _expand(self, node: _Node) -> None:
        """Choose the node's move and split its candidates by what each would hear back."""
        if node.move is not None:
            return
        step, replays = node.step, node.replays
        keys = {r.next_key(step) for r in replays}
        if len(keys) == 1:
            first = replays[0]
            if step >= len(first.actions):
                node.move = Move(MoveKind.FINAL, outputs=first.task.script.gold_outputs)
                return
            node.move = Move(MoveKind.GOLD, first.actions[step])
            _split(node, {id(r): r.advance() for r in replays}, step + 1)
            return
        if all(key[0] == "user" or key == ("end",) for key in keys):
            node.move = Move(MoveKind.ASK)
            going = [r for r in replays if r.next_key(step)[0] == "user"]
            node.replays = going  # the others have nothing left to do: the user ends the episode
            _split(node, {id(r): r.advance() for r in going}, step + 1)
            return
        probe = _best_probe(replays, step)
        if probe is not None:
            action, answers = probe
            node.move = Move(MoveKind.PROBE, action)
            _split(node, answers, step)
            return
        # Nothing tells them apart before they act differently: follow what most of them do next.
        keys_in_order = [r.next_key(step) for r in replays]
        likeliest = max(keys_in_order, key=keys_in_order.count)
        node.replays = [r for r in replays if r.next_key(step) == likeliest]
        node.move = script_move(node.replays[0].task.script, step)
        if node.move.kind is MoveKind.GOLD:
            _split(node, {id(r): r.advance() for r in node.replays}, step + 1)


def _split(node: _Node, answers: dict[int, str], step: int) -> None:
    for replay in node.replays:
        node.children.setdefault(answers[id(replay)], _Node(step, [])).replays.append(replay)


def _follow(node: _Node, conversation: str, pos: int) -> tuple[_Node, int]:
    """The child whose answer comes first in ``conversation`` after ``pos`` (the longest on a tie)."""
    best: tuple[int, int, str] | None = None
    for answer in node.children:
        at = conversation.find(answer, pos) if answer else -1
        if at >= 0 and (best is None or (at, -len(answer)) < (best[0], -best[1])):
            best = (at, len(answer), answer)
    if best is None:  # an empty answer, or one the replay did not predict (an LLM user's words)
        return node.children.get("", next(iter(node.children.values()))), pos
    return node.children[best[2]], best[0] + best[1]


def _best_probe(replays: list[_Replay], step: int) -> tuple[GoldAction, dict[int, str]] | None:
    """The read-only call whose answers split ``replays`` best (none errs for any of them); the user's
    checks first, so that the agent's tool calls stay its reference ones wherever they can."""
    best: tuple[int, GoldAction, dict[int, str]] | None = None
    for action in _probe_calls(replays, step):
        if best is not None and action.requestor != best[1].requestor:
            break  # a user check splits them: no agent call needed
        answers: dict[int, str] = {}
        for replay in replays:
            result = replay.run(action)
            if result.is_error:
                break
            answers[id(replay)] = result.content
        else:
            largest = max(list(answers.values()).count(a) for a in set(answers.values()))
            if largest < len(replays) and (best is None or largest < best[0]):
                best = (largest, action, answers)
    return None if best is None else (best[1], best[2])


def _probe_calls(replays: list[_Replay], step: int) -> Iterator[GoldAction]:
    """Calls of the read-only tools τ marks: the user's argument-free checks that no candidate plans to run
    (the scripted user runs those when asked; a planned one would stand for its reference action), then
    the agent's, arguments taken from the candidates' reference actions."""
    by_name: dict[str, list[Any]] = {}
    strings: list[str] = []
    for replay in replays:
        for action in replay.actions[step:]:
            for name, value in action.arguments.items():
                if value not in by_name.setdefault(name, []):
                    by_name[name].append(value)
                if isinstance(value, str) and value not in strings:
                    strings.append(value)
    session = replays[0].session()
    planned = {a.name for r in replays for a in r.actions[step:] if a.requestor == "user"}
    for function in _functions(session.user_tools):
        required = (function.get("parameters") or {}).get("required")
        if not required and function["name"] not in planned and session.is_read_only(function["name"], by_user=True):
            yield GoldAction(function["name"], {}, requestor="user")
    for function in _functions(session.tools):
        if session.is_read_only(function["name"]):
            required = list((function.get("parameters") or {}).get("required") or [])
            pools = [by_name.get(name) or strings for name in required]
            for values in itertools.islice(itertools.product(*pools), MAX_PROBES_PER_TOOL):
                yield GoldAction(function["name"], dict(zip(required, values, strict=True)))


def _functions(schemas: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    functions = [schema.get("function") or {} for schema in schemas]
    return [f for f in functions if f.get("name")]


class ScriptIndex:
    """The tasks the oracle knows, grouped by instruction (stripped)."""

    def __init__(self, tasks: Iterable[TaskScript | KnownTask]) -> None:
        grouped: dict[str, list[KnownTask]] = {}
        self.size = 0
        for task in tasks:
            known = task if isinstance(task, KnownTask) else KnownTask(task)
            instruction = known.script.user_instructions.strip()
            if instruction:
                self.size += 1
                grouped.setdefault(instruction, []).append(known)
        self.by_instruction: dict[str, TaskGroup] = {text: TaskGroup(group) for text, group in grouped.items()}
        """Stripped instruction -> the tasks that open with it."""

    def within(self, text: str) -> tuple[int, TaskGroup] | None:
        """The longest known instruction found in ``text``, and where it ends (templates that merge turns)."""
        found = [(len(k), text.find(k), k) for k in self.by_instruction if k in text]
        if not found:
            return None
        _, at, instruction = max(found)
        return at + len(instruction), self.by_instruction[instruction]
