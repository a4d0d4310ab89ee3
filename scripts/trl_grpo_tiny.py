"""TRL's own GRPOTrainer for a few optimizer steps on τ² tasks, with τ episodes as its completions (CPU).

Usage (docs/trl.md): ``slime-tau make-tiny-model --tokenizer .cache/tokenizers/qwen2_5 --out models/tiny``,
``slime-tau serve --model models/tiny --port 30000 &``, then
``python scripts/trl_grpo_tiny.py --model models/tiny --policy-url http://127.0.0.1:30000 --out runs/trl``.

It trains the model the server was built from (the server keeps its first weights: the rollouts are that
checkpoint's, as with any server that is not synced) and prints one JSON line: the loss of each step, how
many parameters changed, whether TRL's completion mask equalled our loss mask, and the rewards TRL saw next
to τ's. Exit 1 if the loss is not finite, nothing changed, or a mask or reward differs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the tiny model's folder (make-tiny-model --out)")
    parser.add_argument("--policy-url", required=True, help="the server that samples the episodes (serve --model)")
    parser.add_argument("--tasks", default="tau2/retail/train", help="BENCHMARK/DOMAIN/SPLIT")
    parser.add_argument(
        "--task-ids", default="57", help="task ids (τ² retail train 25 and 57 ask for no write and nothing to say)"
    )
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=1024)
    parser.add_argument("--max-tokens-per-turn", type=int, default=16)
    parser.add_argument("--out", default="runs/trl")
    ns = parser.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from slime_tau_plugin.adapters.trl.check import check_batches, recording_trainer_class
    from slime_tau_plugin.adapters.trl.reward import tau_reward
    from slime_tau_plugin.adapters.trl.rollout import TauRollout
    from slime_tau_plugin.adapters.trl.rows import trl_rows
    from slime_tau_plugin.engine.envs import get_backend

    benchmark, domain, split = ns.tasks.split("/")
    wanted = ns.task_ids.split(",")
    refs = [ref for ref in get_backend(benchmark).task_refs(domain, split) if ref.task_id in wanted]
    model = AutoModelForCausalLM.from_pretrained(ns.model)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = GRPOConfig(
        output_dir=ns.out,
        per_device_train_batch_size=ns.num_generations * len(refs),
        num_generations=ns.num_generations,
        max_steps=ns.steps,
        max_completion_length=ns.max_completion_length,
        learning_rate=1e-3,
        temperature=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=1,
        gradient_checkpointing=False,  # a 20M model needs no checkpointing; recomputing the 5k-token prompt costs
    )
    rollout = TauRollout(
        off_policy=True,  # serve --model keeps the weights it started with: TRL does not sync them
        tau_policy_url=ns.policy_url,
        tau_user="scripted",
        tau_max_turns=4,
        tau_max_tokens_per_turn=ns.max_tokens_per_turn,
    )
    trainer = recording_trainer_class()(
        model=model,
        reward_funcs=[tau_reward],
        args=args,
        train_dataset=Dataset.from_list(trl_rows(refs)),
        processing_class=AutoTokenizer.from_pretrained(ns.model),
        rollout_func=rollout,
    )
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    changed = sum(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    report: dict[str, Any] = {
        "steps": trainer.state.global_step,
        "losses": losses,
        "parameters_changed": changed,
        "parameters": len(before),
        **check_batches(trainer.tau_batches),
    }
    print(json.dumps(report))
    ok = (
        losses
        and all(math.isfinite(x) for x in losses)
        and changed > 0
        and report["masks_equal"]
        and report["rewards_equal"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
