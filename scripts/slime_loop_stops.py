"""A customer that stops before the required write, inside slime's OWN rollout loop (issue 40 §3): the review's
``premature_stop`` takes the episode out of training; the other episodes of its group are trained on.

Drives slime's ``generate_rollout_async`` as ``slime_loop_review.py`` does (its server, its slime args, our
``generate``, ``tau_user: llm`` on the built-in chat user server), on τ² telecom train tasks whose reference
solution has a write (τ²'s ``ToolType.WRITE``): the customer's own on its phone (``toggle_airplane_mode``,
``reseat_sim_card``...: ``EnvSession.required_user_writes``) and the agent's after them (``enable_roaming``,
``refuel_data``..., or the transfer to a human a task scored on ``ACTION`` requires). The oracle asks the
customer to act on its phone; in ``--stop-share`` of the episodes its first request is answered with a stop
(``customer_faults.EARLY_STOP_LINE``, ``###STOP###``) instead: the customer ends while the agent waits on it,
the write never happens, τ's reward is 0, and the review must call it ``premature_stop``
(``premature_termination``, ``critical_hindered``) and make the episode ``user_error``.

Then ``slime_loop_review.check``: slime's own ``RolloutManager._post_process_rewards`` with our hook, every
flagged sample FAILED with advantage 0 and loss mask 0, its group's clean samples trained on, the step's review
metrics, template fidelity of every sample. Exit 0 only if every check holds; 2 without slime.

    PYTHONPATH=$PWD:$PWD/scripts:/work/slime-scratch /work/slime-venv/bin/python scripts/slime_loop_stops.py
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import slime_loop_check as loop
import slime_loop_faults as faults
import slime_loop_review as review
import slime_loop_step as step

DOMAIN = "telecom"


def prepare_writes(tmp: Path, rows: list[int]) -> tuple[Path, Path]:
    """τ² telecom's train rows whose task requires a write, the agent's or the customer's own
    (``EnvSession.required_writes``, ``required_user_writes``), and the eval config ``prepare`` writes; returns
    (train file, eval config) and appends the rows kept to ``rows``."""
    from slime_tau_plugin.engine.envs import get_backend
    from slime_tau_plugin.engine.episode.task_ref import TaskRef

    everything = tmp / "all.jsonl"
    cmd = [*loop.cli(), "prepare", "--benchmark", "tau2", "--domain", DOMAIN, "--split", "train"]
    cmd += ["--out", str(everything), "--eval", f"tau2/{DOMAIN}/test"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    backend = get_backend("tau2")
    refs = {ref.task_id: ref for ref in backend.task_refs(DOMAIN, "train")}
    kept = []
    for line in everything.read_text().splitlines():
        meta = json.loads(line)["metadata"]
        ref: TaskRef | None = refs.get(str(meta.get("task_id")))
        session = backend.open(ref) if ref is not None else None
        if session is not None and (session.required_writes() or session.required_user_writes()):
            kept.append(line)
    train = tmp / "train.jsonl"
    train.write_text("\n".join(kept) + "\n")
    rows.append(len(kept))
    return train, next(p for p in tmp.glob("*.y*ml"))


def start_customer(share: float, seed: int, told: collections.Counter) -> tuple[Any, str]:
    """The chat user server; ``share`` of the episodes answer the oracle's first request to act on the phone with a
    stop, counted in ``told`` (one draw per episode: the unfixable-line tasks ask many times before their transfer,
    and a draw per request would stop nearly all of them, leaving no clean episode in a group). Returns (server,
    base URL)."""
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply
    from slime_tau_plugin.tools.servers.customer_faults import EARLY_STOP_LINE
    from slime_tau_plugin.tools.servers.fake_models import ASK_USER

    rng, lock = random.Random(seed), threading.Lock()

    def reply(messages: list[dict], tools: list[dict] | None) -> dict:
        last = messages[-1] if messages else {}
        asked = [m for m in messages if m.get("role") == "user" and ASK_USER in str(m.get("content") or "")]
        if asked and asked[-1] is last and len(asked) == 1:  # the agent waits on it, for the first time
            with lock:
                draw = rng.random()
            if draw < share:
                told["stopped instead of acting"] += 1
                return {"role": "assistant", "content": EARLY_STOP_LINE}
            told["acted"] += 1
        return scripted_user_reply(messages, tools, 2)  # serve-user's --max-replies 2: "go ahead" when asked

    server = ChatUserServer(reply=reply).start()
    return server, server.base_url


def main() -> int:
    p = step.step_parser(__doc__)
    p.add_argument("--stop-share", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=5)
    ns = p.parse_args()
    slime = loop.slime_api(*step.STEP_API)
    if slime is None:
        return 2
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    told: collections.Counter = collections.Counter()
    rows: list[int] = []

    def tau_yaml(user_url: str) -> str:
        tau = faults.user_yaml(loop.TAU_YAML, user_url).replace("tau_domain: retail", f"tau_domain: {DOMAIN}")
        return tau.replace("}", review.REVIEW_YAML)

    args, out, user = step.one_step(
        ns,
        slime,
        "slime-stops-",
        lambda: start_customer(ns.stop_share, ns.seed, told),
        tau_yaml,
        lambda tmp: prepare_writes(tmp, rows),
    )
    print(f"train rows with a required write: {rows[0]}; the customer, asked to act: {dict(told)}")
    bad = review.check(
        args, out.samples, load_tokenizer(loop.tokenizer_dir()), user.requests.total, "premature_stop", DOMAIN
    )
    flat = [s for g in out.samples for s in g]
    for i, s in enumerate(flat):
        meta = s.metadata.get("tau_review") or {}
        for finding in meta.get("findings") or []:
            if finding["check"] != "premature_stop" or finding["severity"] != "critical_hindered":
                bad.append(f"sample {i}: an unexpected finding {finding}")
    if told["stopped instead of acting"] < sum(
        bool((s.metadata.get("tau_review") or {}).get("excluded")) for s in flat
    ):
        bad.append("more episodes were removed than the customer stopped early")
    return loop.verdict(bad)


if __name__ == "__main__":
    sys.exit(main())
