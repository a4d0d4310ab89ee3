"""A GRPO group faces the same customer inside slime's OWN rollout loop (issue 33 §4): ``tau_user_shared_opening``.

Drives slime's ``generate_rollout_async`` the way ``slime_loop_check.py`` does (its server, its slime args, our
``generate``), with ``tau_user: llm`` on the built-in chat user server, whose every opening differs (it numbers
them, as a customer sampled at temperature > 0 would). slime's data source numbers the groups (``group_index``),
over-sampling starts more groups than it keeps and aborts the rest. With the key on (the default here) it checks:
the server saw at most one opening request per group slime started, the samples of each kept group start from the
same customer message and the same prompt ids, and every sample's ids are the chat template's render of its messages
(token-exact). ``--off`` runs the same step without the key and prints its counts (every sample asks its own).
Exit 0 only if every check holds; 2 without slime.

    PYTHONPATH=$PWD:/work/slime-scratch /work/slime-venv/bin/python scripts/slime_loop_group.py [--off]
"""

from __future__ import annotations

import itertools
import sys
import threading
from typing import Any

import slime_loop_check as loop
import slime_loop_faults as faults
import slime_loop_step as step

EMPTY_THINK = "<think>\n\n</think>\n\n"


def start_customer() -> tuple[Any, str]:
    """The chat user server; each opening gets its own number. Returns (server, base URL)."""
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply

    numbers, lock = itertools.count(), threading.Lock()

    def reply(messages: list[dict], tools: list[dict] | None) -> dict:
        message = scripted_user_reply(messages, tools, 0)
        if any(m.get("role") == "assistant" for m in messages):
            return message
        with lock:
            number = next(numbers)
        return {**message, "content": f"{message['content']} (caller {number})"}

    server = ChatUserServer(reply=reply).start()
    return server, server.base_url


def record_groups() -> list[int]:
    """Wrap the generate slime's flag names: the group index of every train sample slime starts (the over-sampled
    groups it aborts included)."""
    import importlib

    plugin = importlib.import_module("slime_tau_plugin.generate")
    generate, started = plugin.generate, []

    async def recording(args, sample, sampling_params, evaluation=False):
        if not evaluation:
            started.append(sample.group_index)
        return await generate(args, sample, sampling_params, evaluation=evaluation)

    plugin.generate = recording
    return started


def check(groups: list[list[Any]], user: Any, started: list[int], shared: bool, tokenizer: Any) -> list[str]:
    """What must hold on the step's samples; returns the failures (empty: pass)."""
    openings = [r for r in user.requests if not any(m.get("role") == "assistant" for m in r["messages"])]
    flat = [s for g in groups for s in g]
    print(
        f"slime started {len(started)} episodes in {len(set(started))} groups and kept {len(groups)} groups; "
        f"user requests {len(user.requests)}, openings {len(openings)} (shared opening {'on' if shared else 'off'})"
    )
    bad: list[str] = []
    for g, group in enumerate(groups):
        first = {next(m["content"] for m in s.metadata["messages"] if m["role"] == "user") for s in group}
        prompts = {tuple(s.tokens[: len(s.tokens) - s.response_length]) for s in group}
        if shared and (len(first) != 1 or len(prompts) != 1):
            bad.append(f"group {g}: {len(first)} different openings, {len(prompts)} different prompts")
        if not shared and len(first) != len(group):
            bad.append(f"group {g}: the key is off, yet samples share an opening")
    for i, s in enumerate(flat):
        text = tokenizer.apply_chat_template(s.metadata["messages"], tools=s.metadata["tools"], tokenize=False)
        ids = tokenizer.encode(text.replace(EMPTY_THINK, ""), add_special_tokens=False)
        if ids[: len(s.tokens)] != list(s.tokens) or s.status.name == "FAILED":
            bad.append(f"sample {i} ({s.status.name}) is not the template's render of its messages")
    if shared and not len(groups) <= len(openings) <= len(set(started)):
        bad.append(f"{len(openings)} opening requests for {len(set(started))} groups started")
    if not shared and len(openings) != len(started):
        bad.append(f"{len(openings)} opening requests for {len(started)} episodes started")
    return bad


def main() -> int:
    p = step.step_parser(__doc__)
    p.add_argument("--off", action="store_true", help="run without tau_user_shared_opening (for the counts)")
    ns = p.parse_args()
    slime = loop.slime_api(*step.STEP_API)
    if slime is None:
        return 2
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    extra = f", tau_record_messages: true, tau_user_shared_opening: {str(not ns.off).lower()}}}"
    started = record_groups()
    _, out, user = step.one_step(
        ns,
        slime,
        "slime-group-",
        start_customer,
        lambda user_url: faults.user_yaml(loop.TAU_YAML, user_url).replace("}", extra),
    )
    return loop.verdict(check(out.samples, user, started, not ns.off, load_tokenizer(loop.tokenizer_dir())))


if __name__ == "__main__":
    sys.exit(main())
