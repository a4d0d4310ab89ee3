"""issue 34 §3: what a multi-node, 20-hour run needs, checked by the dry run (one line each: a warning in a dry
run, a refusal in a real run), fully-async over several nodes with its per-node plan, slime's own rollout-engine
fault tolerance where slime has it, and a checkpoint cadence that loses at most 5 steps on a crash."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.adapters.slime.launch.test_launch_scripts import (
    MISSING,
    ROOT,
    bash_lib,
    one_error_line,
    run_script,
    shared_check_cache,  # noqa: F401 - the session's check cache
    train_flags,
)

SCRIPT = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
LOCAL_TYPES = {"ext2/ext3", "ext4", "xfs", "btrfs", "overlayfs", "overlay", "tmpfs", "ramfs", "zfs", "f2fs"}


def warnings(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[tau] WARNING: ")]


def own_address() -> str | None:
    done = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False)
    words = done.stdout.split() if done.returncode == 0 else []
    return next((w for w in words if w.count(".") == 3), None)


def fs_type(path: Path) -> str:
    return subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True).stdout.strip()


def test_fully_async_on_two_nodes_trains_on_one_and_rolls_out_on_the_other_with_a_per_node_plan(tmp_path):
    result = run_script(SCRIPT, tmp_path, NODE_ADDRS="10.0.0.2,10.0.0.1", ROLLOUT_MODE="fully_async")
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--actor-num-nodes"] == ["1"] and flags["--actor-num-gpus-per-node"] == ["6"]
    assert flags["--rollout-num-gpus"] == ["6"] and flags["--num-gpus-per-node"] == ["6"]
    assert "--colocate" not in flags and "--use-fault-tolerance" in flags
    out = result.stdout
    # slime sorts the cluster's GPUs by node IP: 10.0.0.1 (node 1) trains though node 0 is the head
    assert "  node 0 (10.0.0.2, head): GPUs 0,1,2,3,4,5: roll out (SGLang engines; fully async" in out
    assert "  node 1 (10.0.0.1): GPUs 0,1,2,3,4,5: train (Megatron; slime gives training the lowest node IPs)" in out
    assert "training: 6 GPUs on 1 node(s) = TP 2 x CP 1 x data-parallel 3; rollout: 6 SGLang engine(s)" in out
    # without IP addresses the plan says the rule instead of guessing
    named = run_script(SCRIPT, tmp_path, NUM_NODES="2", MASTER_ADDR="10.0.0.1", USER_SIM_NODES="head", COLOCATE="0")
    assert named.returncode == MISSING, named.stderr
    assert "slime gives training the nodes with the lowest IP addresses" in named.stdout
    bad = one_error_line(run_script(SCRIPT, tmp_path, NODE_ADDRS="10.0.0.1,10.0.0.2", COLOCATE="0", ACTOR_NODES="2"))
    assert "ACTOR_NODES=2 with COLOCATE=0 on NUM_NODES=2: whole nodes train and the others roll out" in bad


def test_a_multi_node_dry_run_warns_about_networking_and_node_local_checkpoints_one_line_each(tmp_path):
    result = run_script(SCRIPT, tmp_path, NODE_ADDRS="10.255.0.1,10.255.0.2")
    assert result.returncode == MISSING, result.stderr
    found = warnings(result.stdout)
    if own_address() is not None:  # a machine whose addresses can be listed
        (network,) = [w for w in found if "is not one of this machine's" in w]
        assert network.startswith("[tau] WARNING: node 0's address 10.255.0.1 (NODE_ADDRS/MASTER_ADDR)")
        assert ("--network host" in network) == Path("/.dockerenv").exists()
    local = fs_type(tmp_path) in LOCAL_TYPES
    storage = [w for w in found if "local to this node" in w]
    assert len(storage) == int(local), found
    if local:
        assert f"SAVE={tmp_path}/ckpt/Qwen3-4B-Instruct-2507_slime_tau2 is on {fs_type(tmp_path)}" in storage[0]
        assert "put SAVE and LOAD on storage every node mounts at the same path" in storage[0]
    # this machine's own address and storage said to be shared: no warning
    mine = own_address()
    if mine is not None:
        quiet = run_script(SCRIPT, tmp_path, NODE_ADDRS=f"{mine},10.255.0.2", SHARED_STORAGE="1")
        assert quiet.returncode == MISSING and not warnings(quiet.stdout), quiet.stdout
    # one node: none of this is checked
    assert not warnings(run_script(SCRIPT, tmp_path).stdout)


def test_a_real_run_refuses_what_the_dry_run_warns_about(tmp_path):
    body = "tau_check_multinode; echo passed"
    env = {"NUM_NODES": "2", "NODE_RANK": "0", "NODE_ADDRS": "10.255.0.1,10.255.0.2", "MASTER_ADDR": "10.255.0.1"}
    env |= {"SAVE": str(tmp_path / "save"), "LOAD": str(tmp_path / "save"), "SHARED_STORAGE": "0", "DRY_RUN": "0"}
    if own_address() is not None:
        assert "is not one of this machine's" in one_error_line(bash_lib(body, tmp_path, **env))
        env |= {"NODE_ADDRS": f"{own_address()},10.255.0.2", "MASTER_ADDR": own_address()}
    if fs_type(tmp_path) in LOCAL_TYPES:
        line = one_error_line(bash_lib(body, tmp_path, **env))
        assert line.startswith(f"error: SAVE={tmp_path}/save is on ") and "SHARED_STORAGE=1 if it is shared" in line
    assert "passed" in bash_lib(body, tmp_path, **{**env, "SHARED_STORAGE": "1"}).stdout


def test_train_data_built_from_other_task_sets_is_refused_in_one_line(tmp_path):
    (tmp_path / "data").mkdir()
    row = {"index": 0, "metadata": {"benchmark": "tau2", "domain": "retail", "split": "train", "task_id": "0"}}
    (tmp_path / "data/tau2_train.jsonl").write_text(json.dumps(row) + "\n")
    line = one_error_line(run_script(SCRIPT, tmp_path))  # TRAIN_SETS: retail, airline and telecom
    assert f"TRAIN_DATA={tmp_path}/data/tau2_train.jsonl was built from tau2/retail/train, but TRAIN_SETS=" in line
    assert "names tau2/airline/train, tau2/retail/train, tau2/telecom/train; delete the file" in line
    same = run_script(SCRIPT, tmp_path, TRAIN_SETS="tau2/retail/train")
    assert "was built from" not in same.stderr  # the same sets: reused (here its eval rows are still missing)


@pytest.mark.parametrize(
    ("has_flag", "setting", "added", "refused"),
    [(True, "auto", True, False), (False, "auto", False, False), (False, "1", False, True), (True, "0", False, False)],
)
def test_slimes_fault_tolerance_is_used_where_slime_has_it(tmp_path, has_flag, setting, added, refused):
    slime = tmp_path / "slime"
    (slime / "slime/utils").mkdir(parents=True)
    flag = '"--use-fault-tolerance",' if has_flag else ""
    (slime / "slime/utils/arguments.py").write_text(f"parser.add_argument(\n    {flag}\n)\n")
    result = run_script(SCRIPT, tmp_path, SLIME_DIR=str(slime), USE_FAULT_TOLERANCE=setting)
    if refused:
        assert "USE_FAULT_TOLERANCE=1, but the slime at SLIME_DIR=" in one_error_line(result)
        return
    assert result.returncode == MISSING, result.stderr
    assert ("--use-fault-tolerance" in train_flags(result.stdout)) is added
    if not has_flag:
        assert "fault tolerance: this slime has no --use-fault-tolerance" in result.stdout


def test_checkpoints_every_5_steps_and_the_readme_runs_docker_with_host_networking(tmp_path):
    result = run_script(SCRIPT, tmp_path)
    assert train_flags(result.stdout)["--save-interval"] == ["5"]
    assert "every 5 rollouts: a crash loses at most 5 steps" in result.stdout
    for doc in ("README.md", "docs/slime-training.md"):
        docker = [line for line in (ROOT / doc).read_text().splitlines() if line.startswith("docker run")]
        assert docker and all("--network host" in line for line in docker), doc
