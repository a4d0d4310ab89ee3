"""NeMo Gym trains on slime's episode: the parity cases (``tests/parity.py``) through NeMo Gym's own rollout
collection and our agent's ``/run``, compared id for id with slime's ``generate`` in this process, against one oracle
server. What is compared is what NeMo Gym's collection keeps (its rollouts file, read back into one sequence by
``run_trajectory``); a FAILED episode is NeMo Gym's failed rollout instead (its failures file; masked, reward 0.0)."""

from __future__ import annotations

import pytest

from tests.parity import EXPECTED_STATUS, PARITY_CASES, ParityRecord, assert_same, slime_record


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: c.name)
def test_nemo_gym_trains_on_slimes_episode(collected, oracle, qwen25_dir, case):
    from slime_tau_plugin.adapters.nemo_gym.turns import run_trajectory

    slime = slime_record(oracle.url, qwen25_dir, case)
    assert slime.status == EXPECTED_STATUS[case.name]
    row = collected["parity"][case.name]
    assert row["task"] == case.task_name and row["tau_status"] == slime.status
    if slime.reward is None:  # slime's remove_sample: NeMo Gym's own "not trained" is a failed rollout
        assert not row["kept"] and row["instance_config"]["mask_sample"] and row["_ng_failure_class"]
        assert row["reward"] == 0.0 and run_trajectory(row).reward is None  # a number for NeMo RL, masked
        return
    assert row["kept"], f"NeMo Gym set aside {case.name}: {row.get('_ng_failure_class')}"
    traj = run_trajectory(row)
    ours = ParityRecord.of(
        traj.prompt_ids, traj.response_ids, traj.loss_mask, traj.log_probs, traj.reward, row["tau_status"]
    )
    assert_same(slime, ours, "NeMo Gym", case)
