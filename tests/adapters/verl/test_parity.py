"""verl's agent loop trains on slime's episode: the parity cases (``tests/parity.py``) through ``TauAgentLoop`` and
verl's own padding and batch assembly, compared id for id with slime's ``generate`` in this process, against one
oracle server. What is compared is verl's batch (left-padded prompts, right-padded responses, ``response_mask``,
``rollout_log_probs``, ``rm_scores``), unpadded by its ``attention_mask``: what verl's trainer reads.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.adapters.verl.conftest import verl_config
from tests.adapters.verl.server_manager import HTTPServerManager
from tests.adapters.verl.test_tau_agent_loop import SAMPLING, dataset_rows, make_loop, run_rows, verl_batch
from tests.parity import EXPECTED_STATUS, PARITY_CASES, PARITY_SETS, ParityRecord, assert_same, slime_record


@pytest.fixture(scope="module")
def parity_server(oracle_server):
    assert {(d, s) for _, d, s in PARITY_SETS} <= {("retail", "train"), ("airline", "test")}
    return oracle_server  # the session's oracle knows both parity sets


def verl_records(batch, outputs) -> list[ParityRecord]:
    """Each row of verl's padded batch, unpadded by its attention mask, with the reward verl put on it."""
    t = batch.batch
    prompt_width = t["prompts"].shape[1]
    records = []
    for i, out in enumerate(outputs):
        attention = t["attention_mask"][i].tolist()
        prompt = [x for x, a in zip(t["prompts"][i].tolist(), attention[:prompt_width], strict=True) if a]
        n = sum(attention[prompt_width:])
        status = out.extra_fields["status"]
        trains = status not in ("failed", "aborted")
        if not trains:  # verl's stand-in for slime's remove_sample (tau_grpo keeps the row out of its group)
            assert t["response_mask"][i].sum().item() == 0 and t["rm_scores"][i].sum().item() == 0.0
        records.append(
            ParityRecord.of(
                prompt,
                t["responses"][i, :n].tolist(),
                t["response_mask"][i, :n].tolist(),
                t["rollout_log_probs"][i, :n].tolist(),
                t["rm_scores"][i].sum().item() if trains else None,
                status,
            )
        )
    return records


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: c.name)
def test_verl_trains_on_slimes_episode(tmp_path, qwen25, qwen25_dir, parity_server, case):
    overrides = [f"+tau.{k.removeprefix('tau_')}={v}" for k, v in case.settings.items()]
    config = verl_config(*overrides)
    manager = HTTPServerManager(parity_server.url)
    rows = dataset_rows(tmp_path, config, qwen25, [case.task])
    outputs = run_rows(lambda: make_loop(config, manager, qwen25), rows, {**SAMPLING, "sampling_seed": case.seed})
    ours = verl_records(verl_batch(config, qwen25, outputs, rows), outputs)[0]

    slime = slime_record(parity_server.url, qwen25_dir, case)
    assert slime.status == EXPECTED_STATUS[case.name]
    assert (sum(slime.loss_mask) > 0) == (slime.reward is not None), "an episode trains exactly when it is scored"
    assert_same(slime, ours, "verl", case)


def test_import_slime_tau_plugin_does_not_import_verl():
    """Read at run time where verl, Ray and torch are installed (``test_layers`` reads it from the source)."""
    code = "import sys, slime_tau_plugin, slime_tau_plugin.generate; print([m for m in ('verl', 'ray', 'torch')"
    code += " if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
