"""TRL on two processes for real: ``torch.distributed.run`` starts two CPU processes (gloo), each runs TRL's
``GRPOTrainer.train()`` for one step on its row; with 1 row per process and num_generations=2 the group spans both
(refused before issue #43). Both train, on masks equal to ours, and gather the same step metrics."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_group_spanning_two_trl_processes_trains_on_both(oracle_url, tiny_trl_model, tmp_path):
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        str(ROOT / "tests" / "adapters" / "trl" / "torchrun_worker.py"),
        str(tiny_trl_model),
        oracle_url,
        str(tmp_path),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3000, check=False)
    assert done.returncode == 0, done.stderr[-3000:]

    records = [json.loads((tmp_path / f"process-{i}.json").read_text()) for i in range(2)]
    for i, record in enumerate(records):
        assert record["process"] == i and record["processes"] == 2 and record["step"] == 1
        assert record["check"]["rows"] == 1 and record["check"]["masks_equal"] and record["check"]["rewards_equal"]
        assert record["status"] == ["completed"] and record["check"]["rewards"] == [1.0]
        assert record["logged"] and record["logged"][0]["tau/tau2/retail/samples"] == 2  # both processes' rows
    assert records[0]["metrics"] == records[1]["metrics"]  # gathered: the same numbers on both
