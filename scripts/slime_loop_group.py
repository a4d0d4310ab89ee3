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

import argparse
import itertools
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import slime_loop_check as loop
import slime_loop_faults as faults

EMPTY_THINK = "<think>\n\n</think>\n\n"


def start_customer() -> Any:
    """The chat user server; each opening gets its own number."""
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply

    numbers, lock = itertools.count(), threading.Lock()

    def reply(messages: list[dict], tools: list[dict] | None) -> dict:
        message = scripted_user_reply(messages, tools, 0)
        if any(m.get("role") == "assistant" for m in messages):
            return message
        with lock:
            number = next(numbers)
        return {**message, "content": f"{message['content']} (caller {number})"}

    return ChatUserServer(reply=reply).start()


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
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-train-groups", type=int, default=4)
    p.add_argument("--n-samples-per-prompt", type=int, default=4)
    p.add_argument("--off", action="store_true", help="run without tau_user_shared_opening (for the counts)")
    ns = p.parse_args()
    try:
        from slime.rollout.sglang_rollout import generate_rollout_async
        from slime.utils.async_utils import run
        from slime.utils.http_utils import init_http_client
        from slime.utils.misc import load_function
    except ImportError as exc:
        print(f"slime is not importable ({exc}); run with PYTHONPATH=<slime checkout> in slime's venv")
        return 2
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    ns.extra_groups, ns.max_response_len, ns.max_tokens_per_gpu, ns.max_context_len = 2, 1024, 16384, 16384
    ns.filter, ns.extra_flags = "none", ""
    tok = loop.tokenizer_dir()
    server = user = None
    with tempfile.TemporaryDirectory(prefix="slime-group-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            train, eval_yaml = loop.prepare(tmp, ["tau2/retail/test"])
            server, url = loop.start_server(tok, 0, tmp / "server.log")
            user = start_customer()
            extra = f", tau_record_messages: true, tau_user_shared_opening: {str(not ns.off).lower()}}}"
            tau_yaml = tmp / "tau.yaml"
            tau_yaml.write_text(faults.user_yaml(loop.TAU_YAML, user.base_url).replace("}", extra))
            args = loop.build_args(ns, tok, url, train, eval_yaml, tau_yaml)
            started = record_groups()
            init_http_client(args)
            data_source = load_function(args.data_source_path)(args)
            out, _ = run(generate_rollout_async(args, 0, data_source.get_samples))
        finally:
            loop.stop_started(server, user)
    bad = check(out.samples, user, started, not ns.off, load_tokenizer(tok))
    for line in bad:
        print(f"FAIL: {line}")
    print("PASS" if not bad else f"FAIL ({len(bad)} checks)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
