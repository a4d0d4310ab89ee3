"""One process of ``test_trl_torchrun.py``: TRL's ``GRPOTrainer`` for one step under ``torch.distributed.run``
(gloo on CPU), 1 row per process and num_generations=2, so the one group spans both processes. Writes what it
trained on to ``<out>/process-<index>.json``. Usage: ``worker.py MODEL POLICY_URL OUT``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

from slime_tau_plugin.adapters.trl.check import check_batches, recording_trainer_class
from slime_tau_plugin.adapters.trl.reward import tau_reward
from slime_tau_plugin.adapters.trl.rollout import METRICS_FIELD, TauRollout


def main(model: str, url: str, out: str) -> None:
    args = GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=1,
        num_generations=2,
        max_steps=1,
        max_completion_length=4096,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=1,
        gradient_checkpointing=False,
    )
    trainer = recording_trainer_class()(
        model=AutoModelForCausalLM.from_pretrained(model),
        reward_funcs=[tau_reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "tau2/retail/train/57"}]),
        processing_class=AutoTokenizer.from_pretrained(model),
        rollout_func=TauRollout(off_policy=True, tau_policy_url=url, tau_user="scripted"),
    )
    trainer.train()
    batch = trainer.tau_batches[0]
    record = {
        "process": trainer.accelerator.process_index,
        "processes": trainer.accelerator.num_processes,
        "step": trainer.state.global_step,
        "check": check_batches(trainer.tau_batches),
        "status": batch.rollout["tau_status"],
        "advantages": batch.advantages,
        "metrics": batch.rollout[METRICS_FIELD],
        "logged": [row for row in trainer.state.log_history if "loss" in row],
    }
    Path(out, f"process-{record['process']}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(*sys.argv[1:4])
