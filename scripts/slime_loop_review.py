"""The customer review inside slime's OWN rollout loop (issue 33): a customer's invented identifier that the agent
then acts on takes its episode out of training; the clean episodes of the same groups are trained on.

Drives slime's ``generate_rollout_async`` the way ``slime_loop_check.py`` does (its server, its slime args, our
``generate``), with ``tau_user: llm`` on the built-in chat user server playing the customer: each episode's opening
is the task's scenario (a clean stand-in) except that

- ``--invented-share`` of openings add the task's own payment method id (``credit_card_…``/``gift_card_…``/
  ``paypal_…``), which the instructions never give: an invented identifier (τ²'s ``hallucination``) that the
  oracle's later tool call carries, so the review's severity rule makes it ``critical_helped`` and the episode
  ``user_error``;
- ``--wrong-share`` of openings are a line the oracle cannot place (reward 0, no finding), so groups have spread.

Then, on the step's samples: slime's own ``RolloutManager._post_process_rewards`` with our
``--custom-reward-post-process-path`` (``advantages.post_process_rewards``), the step's metrics (what
``log_rollout`` logs) and, for every sample, template fidelity (the held ids are the chat template's render of
its messages, less the empty think block Qwen3's template adds to the last turn: a reviewed episode stays
token-exact). Exit 0 only if every check holds; 2 without slime.

    PYTHONPATH=$PWD:/work/slime-scratch /work/slime-venv/bin/python scripts/slime_loop_review.py
"""

from __future__ import annotations

import collections
import random
import re
import sys
import threading
from types import SimpleNamespace
from typing import Any

import slime_loop_check as loop
import slime_loop_faults as faults
import slime_loop_step as step

PAYMENT = re.compile(r"^(?:credit_card|gift_card|paypal)_\d+$")
EMPTY_THINK = "<think>\n\n</think>\n\n"
REVIEW_YAML = ", tau_record_messages: true, tau_review_max_error_share: 1.0}"


def gold_payment_ids() -> dict[str, str]:
    """Each retail train task's scenario -> the payment method id its reference solution uses (if any)."""
    from slime_tau_plugin.engine.envs import get_backend

    backend = get_backend("tau2")
    out: dict[str, str] = {}
    for ref in backend.task_refs("retail", "train"):
        script = backend.script(ref)
        for action in script.gold_actions:
            ids = [v for v in action.arguments.values() if isinstance(v, str) and PAYMENT.match(v)]
            if ids and ids[0] not in script.user_instructions:
                out[script.user_instructions.strip()] = ids[0]
                break
    return out


def start_customer(invented: float, wrong: float, seed: int, injected: collections.Counter) -> tuple[Any, str]:
    """The chat user server with the two opening faults, counted in ``injected``; returns (server, base URL)."""
    from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply

    golds, rng, lock = gold_payment_ids(), random.Random(seed), threading.Lock()

    def reply(messages: list[dict], tools: list[dict] | None) -> dict:
        message = scripted_user_reply(messages, tools, 0)
        if any(m.get("role") == "assistant" and m.get("content") for m in messages):
            return message  # only openings are changed
        with lock:
            draw = rng.random()
        gold = golds.get(str(message.get("content") or "").strip())
        if draw < wrong:
            injected["wrong opening"] += 1
            return {"role": "assistant", "content": "Hi, I need help with my account."}
        if draw < wrong + invented and gold:
            injected["invented identifier"] += 1
            return {**message, "content": f"{message['content']}\nPlease charge {gold} for any difference."}
        injected["clean opening"] += 1
        return message

    server = ChatUserServer(reply=reply).start()
    return server, server.base_url


def check(
    args: Any,
    groups: list[list[Any]],
    tokenizer: Any,
    served: int,
    expected: str = "invented_identifier",
    domain: str = "retail",
) -> list[str]:
    """What must hold on the step's samples (``served``: the customer server's request count; ``expected``: the
    check that must have flagged each removed episode; ``domain``: the step's τ² domain); returns the failures
    (empty: pass)."""
    from slime.ray import rollout

    from slime_tau_plugin.adapters.slime.advantages import post_process_rewards
    from slime_tau_plugin.adapters.slime.metrics import ROLLOUT_PREFIX, episode_metrics

    flat = [s for g in groups for s in g]
    manager_cls = getattr(rollout.RolloutManager, "__ray_actor_class__", rollout.RolloutManager)
    manager = SimpleNamespace(args=args, custom_reward_post_process_func=post_process_rewards)
    raw, advantages = manager_cls._post_process_rewards(manager, flat)  # slime's dispatch to our hook
    flagged = [i for i, s in enumerate(flat) if (s.metadata.get("tau_review") or {}).get("excluded")]
    bad: list[str] = []
    n = args.n_samples_per_prompt
    mixed = 0
    for i in flagged:
        s, meta = flat[i], flat[i].metadata
        finding = meta["tau_review"]["findings"][0]
        ok = (
            s.status.name == "FAILED"
            and s.remove_sample
            and meta["termination_reason"] == "user_error"
            and meta["failed_endpoint"] == "customer"
            and finding["check"] == expected
            and finding["severity"].startswith("critical")
            and sum(s.loss_mask) == 0
            and advantages[i] == 0.0
        )
        if not ok:
            bad.append(f"flagged sample {i} is not a removed user_error: {s.status.name} {meta.get('tau_review')}")
        group = range(i - i % n, i - i % n + n)
        clean = [j for j in group if j not in flagged]
        mixed += bool(clean)
        for j in clean:
            c = flat[j]
            if c.remove_sample or sum(c.loss_mask) == 0 or c.metadata.get("tau_review", {}).get("findings"):
                bad.append(f"clean sample {j} in the group of flagged sample {i} is not trained on")
    for g in range(len(groups)):
        kept = [i for i in range(g * n, g * n + n) if i not in flagged]
        if len(kept) > 1:
            mean = sum(raw[i] for i in kept) / len(kept)
            if any((raw[i] - mean) * advantages[i] < 0 for i in kept):
                bad.append(f"group {g}: an advantage has the wrong sign over its unflagged episodes")
    for i, s in enumerate(flat):
        text = tokenizer.apply_chat_template(s.metadata["messages"], tools=s.metadata["tools"], tokenize=False)
        text = text.replace(EMPTY_THINK, "")  # Qwen3's template adds it to the last turn only (DESIGN §4)
        ids = tokenizer.encode(text, add_special_tokens=False)
        if ids[: len(s.tokens)] != list(s.tokens):
            bad.append(f"sample {i} ({s.metadata['termination_reason']}) is not the template's render of its messages")
    metrics = episode_metrics(flat, ROLLOUT_PREFIX)
    review = {k.split(f"{domain}/")[-1]: v for k, v in metrics.items() if "/review/" in k and v}
    print(
        f"samples {len(flat)} in {len(groups)} groups; flagged and removed {len(flagged)}; groups mixing a flagged "
        f"and clean episodes {mixed}"
    )
    print(f"advantages: flagged {[advantages[i] for i in flagged]}; clean rewards/advantages by group:")
    for g in range(len(groups)):
        cells = [f"{raw[i]:.0f}/{advantages[i]:+.2f}{'*' if i in flagged else ''}" for i in range(g * n, g * n + n)]
        print("  " + "  ".join(cells))
    print(f"step metrics (review): {review}")
    cost = {k.split(f"{domain}/")[-1]: round(v, 4) for k, v in metrics.items() if "/tau_user/cost_" in k}
    counted = sum(s.metadata["tau_user_cost"]["user"]["requests"] for s in flat)
    print(f"step metrics (customer cost): {cost}; requests counted {counted}, the server saw {served}")
    if not cost.get("tau_user/cost_requests_per_episode") or not 0 < cost.get("tau_user/cost_wait_share", 0) <= 1:
        bad.append(f"the step's customer cost is missing or out of range: {cost}")
    if not 0 < counted <= served:  # slime's over-sampling aborts groups: their requests are not in the step
        bad.append(f"the step's samples count {counted} customer requests, the server saw {served}")
    if not flagged:
        bad.append(f"no episode was flagged by {expected}: raise its share")
    if not mixed:
        bad.append("no group mixed a flagged and a clean episode")
    if metrics.get(f"{ROLLOUT_PREFIX}tau2/{domain}/review/excluded") != float(len(flagged)):
        bad.append("the step's review/excluded does not count the flagged episodes")
    return bad


def main() -> int:
    p = step.step_parser(__doc__)
    p.add_argument("--invented-share", type=float, default=0.3)
    p.add_argument("--wrong-share", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=3)
    ns = p.parse_args()
    slime = loop.slime_api(*step.STEP_API)
    if slime is None:
        return 2
    from slime_tau_plugin.engine.chat.templates import load_tokenizer

    injected: collections.Counter = collections.Counter()
    args, out, user = step.one_step(
        ns,
        slime,
        "slime-review-",
        lambda: start_customer(ns.invented_share, ns.wrong_share, ns.seed, injected),
        lambda user_url: faults.user_yaml(loop.TAU_YAML, user_url).replace("}", REVIEW_YAML),
    )
    print(f"customer openings: {dict(injected)}")
    return loop.verdict(check(args, out.samples, load_tokenizer(loop.tokenizer_dir()), user.requests.total))


if __name__ == "__main__":
    sys.exit(main())
