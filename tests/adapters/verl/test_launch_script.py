"""``scripts/run_verl_qwen3_4B_tau2.sh`` with ``DRY_RUN=1``: verl's config checked, the command printed, no GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slime_tau_plugin.adapters.verl.launch import check_trainer
from slime_tau_plugin.adapters.verl.rows import verl_rows
from slime_tau_plugin.adapters.verl.sampler import overrides
from slime_tau_plugin.engine.errors import ConfigError
from tests.adapters.verl.conftest import ROOT, verl_config
from tests.adapters.verl.rows import write_verl_parquet

SCRIPT = ROOT / "scripts" / "run_verl_qwen3_4B_tau2.sh"


def dry_run(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "DRY_RUN": "1", "PYTHON": sys.executable, "DATA_DIR": str(tmp_path / "data"), **env}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full_env, timeout=300)


def test_dry_run_checks_verl_config_and_prints_the_command(tmp_path):
    done = dry_run(tmp_path, "trainer.total_epochs=2")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "verl config OK: prompt_length=8192 response_length=8192" in out and "user=llm" in out
    assert "-m verl.trainer.main_ppo" in out and "actor_rollout_ref.rollout.mode=async" in out
    assert "trainer=v1/sync+TauReplayBuffer adv_estimator=tau_grpo" in out
    for override in overrides("sync"):  # verl's own sync trainer with τ's sampler, as sampler.py names them
        assert f" {override} " in out or f" '{override}' " in out, override
    assert "VERL_USE_EXTERNAL_MODULES=slime_tau_plugin.adapters.verl.register" in out
    assert "actor_rollout_ref.rollout.multi_turn.enable=true" in out and "configs/verl/tau_agent_loop.yaml" in out
    assert "++tau.user_base_url=http://127.0.0.1:30010/v1" in out and "sglang.launch_server" in out
    assert out.rstrip().endswith("trainer.total_epochs=2"), "arguments are appended: Hydra's last one wins"
    assert not (tmp_path / "data").exists(), "a dry run writes nothing"


def test_scripted_user_needs_no_user_simulator(tmp_path):
    done = dry_run(tmp_path, TAU_USER="scripted")
    assert done.returncode == 0, done.stderr
    assert "user=scripted" in done.stdout and "sglang.launch_server" not in done.stdout


def test_mistakes_fail_the_dry_run_with_one_line(tmp_path):
    typo = dry_run(tmp_path, "actor_rollout_ref.rollout.nn=3")
    assert typo.returncode == 1 and "verl rejects the command line" in typo.stderr
    unknown = dry_run(tmp_path, "++tau.domian=airline")
    assert unknown.returncode == 1 and "did you mean tau.domain?" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_existing_data_files_must_hold_tau_agent_rows(tmp_path, tau2_backend):
    sets = {"TRAIN_SETS": "tau2/retail/test", "EVAL_SETS": "tau2/retail/test"}
    refs = tau2_backend.task_refs("retail", "test")[:2]
    good = write_verl_parquet(verl_rows(refs), tmp_path / "ok.parquet")
    val = write_verl_parquet(verl_rows(refs, evaluation=True), tmp_path / "ok.val.parquet")
    assert dry_run(tmp_path, TRAIN_FILE=str(good), VAL_FILE=str(val), **sets).returncode == 0
    bad = write_verl_parquet(verl_rows(refs, agent_name="tool_agent", evaluation=True), tmp_path / "bad.parquet")
    done = dry_run(tmp_path, TRAIN_FILE=str(good), VAL_FILE=str(bad), **sets)
    assert done.returncode == 1 and "expected tau_agent" in done.stderr
    training_rows_as_eval = dry_run(tmp_path, TRAIN_FILE=str(good), VAL_FILE=str(good), **sets)
    assert training_rows_as_eval.returncode == 1 and "extra_info.tau_eval=[False]; expected evaluation rows" in (
        training_rows_as_eval.stderr
    )


def test_a_parquet_written_for_other_task_sets_is_refused(tmp_path, tau2_backend):
    """The defaults name retail, airline and telecom; a file of retail alone is stale."""
    stale = write_verl_parquet(verl_rows(tau2_backend.task_refs("retail", "train")[:2]), tmp_path / "old.parquet")
    done = dry_run(tmp_path, TRAIN_FILE=str(stale), VAL_FILE=str(stale))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "holds rows of tau2/retail/train but TRAIN_SETS='tau2/retail,airline,telecom/train'" in done.stderr


SYNC = (*overrides("sync"), "algorithm.adv_estimator=tau_grpo")


@pytest.mark.parametrize(
    ("overrides_", "message"),
    [
        ((*SYNC, "algorithm.adv_estimator=grpo"), "lets a failed episode's 0 reward into its group's statistics"),
        ((*SYNC, "algorithm.adv_estimator=tau_gae"), "needs the critic's values"),
        ((*SYNC, "trainer.v1.trainer_mode=tau_sync"), "use trainer.v1.trainer_mode=sync"),
        (("algorithm.adv_estimator=tau_grpo", "trainer.v1.trainer_mode=sync"), "runs no τ failure guard"),
        ((*SYNC, "trainer.v1.trainer_mode=colocate_async"), "name=TauReplayBufferAsync"),
        ((*SYNC, "algorithm.filter_groups.enable=true"), "not passed by verl to a custom sampler"),
        ((*SYNC, "+async_training.staleness_threshold=0.1"), "fully-async recipe"),
    ],
)
def test_trainers_that_break_a_promise_are_refused(overrides_, message):
    """What the launch check refuses (in-process: a dry run per case would cost CI a verl import each)."""
    with pytest.raises(ConfigError, match=message) as refused:
        check_trainer(verl_config(*overrides_))
    assert "\n" not in str(refused.value)
    check_trainer(verl_config(*SYNC, "algorithm.adv_estimator=tau_rloo"))
    check_trainer(verl_config(*overrides("separate_async"), "algorithm.adv_estimator=tau_reinforce_plus_plus"))
