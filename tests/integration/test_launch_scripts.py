"""The slime launch scripts (``scripts/run_*.sh`` + ``scripts/lib/``) and their configs, on a CPU box without slime.

Dry runs (``DRY_RUN=1``) must pass with nothing installed but this package: they check paths, the GPU split and
the τ config, and print the commands. One test runs the real path end to end with stand-ins for what a GPU node
provides, each an executable at the process boundary: ``ray`` (a script that runs the submitted command
locally), ``python -m sglang.launch_server`` (our own OpenAI-compatible chat user server plus one child process,
as SGLang has), and slime's ``train.py`` (loads the config it is given and calls the user simulator).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from slime_tau_plugin.config import TauConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in ROOT.glob("scripts/run_*.sh") if "lib/tau_launch.sh" in p.read_text())
"""The slime launch scripts: every ``run_*.sh`` built on the shared ``scripts/lib/tau_launch.sh``."""
CONFIGS = sorted(ROOT.glob("configs/*.yaml"))
FILLED = {"USER_SIM_BASE_URL": "http://127.0.0.1:30010/v1", "USER_SIM_MODEL_NAME": "user-model"}


def run_script(script: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``bash script args`` with a clean environment: no slime, no wandb key, paths under ``tmp_path``."""
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": sys.executable, "DRY_RUN": "1"}
    base.update(DATA_DIR=str(tmp_path / "data"), RUN_DIR=str(tmp_path / "run"), CKPT_ROOT=str(tmp_path / "ckpt"))
    return subprocess.run(
        ["bash", str(script), *args], env={**base, **env}, capture_output=True, text=True, timeout=180, check=False
    )


def train_flags(stdout: str) -> dict[str, list[str]]:
    """The printed train command as {flag: [values]} (a flag without a value maps to [])."""
    words = shlex.split(stdout.split("train command:\n", 1)[1].replace("\\\n", " "))
    flags: dict[str, list[str]] = {}
    current = None
    for word in words[2:]:  # python3 .../train.py
        if word.startswith("--"):
            current = flags.setdefault(word, [])
        elif current is not None:
            current.append(word)
    return flags


def render(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    sets = [arg for name, value in FILLED.items() for arg in ("--set", f"{name}={value}")]
    cmd = [sys.executable, str(ROOT / "scripts/lib/tau_config.py"), "render", str(config), *sets, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_there_are_three_model_scripts_and_a_config_for_each_benchmark():
    assert {s.name for s in SCRIPTS} >= {
        "run_qwen2.5_7B_instruct_tau2.sh",
        "run_qwen3_4B_instruct_2507_tau2.sh",
        "run_qwen3_8B_thinking_tau2.sh",
    }
    for script in SCRIPTS:
        stem = script.stem.removeprefix("run_").removesuffix("_tau2")
        assert {p.name for p in CONFIGS} >= {f"{stem}_tau2.yaml", f"{stem}_tau1.yaml"}


@pytest.mark.parametrize("benchmark", ["tau2", "tau1"])
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_dry_run_prints_a_complete_train_command(script, benchmark, tmp_path):
    result = run_script(script, tmp_path, TAU_BENCHMARK=benchmark)
    assert result.returncode == 0, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--custom-generate-function-path"] == ["slime_tau_plugin.generate.generate"]
    assert flags["--custom-rollout-log-function-path"] == ["slime_tau_plugin.metrics.log_rollout"]
    assert flags["--custom-eval-rollout-log-function-path"] == ["slime_tau_plugin.metrics.log_eval"]
    assert flags["--custom-config-path"] == [str(tmp_path / "run" / "tau_config.yaml")]
    assert flags["--eval-config"] == [str(tmp_path / "data" / f"{benchmark}_train.eval.yaml")]
    assert flags["--prompt-data"] == [str(tmp_path / "data" / f"{benchmark}_train.jsonl")]
    assert flags["--input-key"] == ["index"] and "--apply-chat-template" not in flags
    assert "--partial-rollout" not in flags and "--use-wandb" not in flags
    per_turn, context = int(flags["--rollout-max-response-len"][0]), int(flags["--rollout-max-context-len"][0])
    assert 256 <= per_turn <= 4096 < context  # a per-turn cap, far below the whole-episode bound
    assert flags["--eval-max-response-len"] == [str(per_turn)]
    assert int(flags["--over-sampling-batch-size"][0]) > int(flags["--rollout-batch-size"][0])
    assert flags["--dynamic-sampling-filter-path"]
    assert flags["--eval-interval"] and "--colocate" in flags
    assert "missing (a real run stops here): SLIME_DIR" in result.stdout
    # the dry run names the prepare call it would make, with this benchmark's sets, and writes nothing
    assert f"prepare --out {tmp_path / 'data'}/{benchmark}_train.jsonl --train {benchmark}/" in result.stdout
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()
    assert "sglang.launch_server" in result.stdout and "--tool-call-parser qwen25" in result.stdout


def test_thinking_script_uses_qwen3_reasoning_and_longer_turns(tmp_path):
    script = ROOT / "scripts/run_qwen3_8B_thinking_tau2.sh"
    result = run_script(script, tmp_path)
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load((ROOT / "configs/qwen3_8B_thinking_tau2.yaml").read_text())
    assert config["tau_reasoning_parser"] == "qwen3" and config["tau_enable_thinking"] is True
    flags = train_flags(result.stdout)
    assert int(flags["--rollout-max-response-len"][0]) > 1024


def test_model_args_come_from_slimes_own_model_script(tmp_path):
    slime = tmp_path / "slime"
    (slime / "scripts/models").mkdir(parents=True)
    (slime / "train.py").write_text("")
    # the two files as slime ships them (abridged): the 2507 file sources qwen3-4B.sh with another rotary base
    (slime / "scripts/models/qwen3-4B.sh").write_text(
        'MODEL_ARGS=(\n   --num-layers 36\n   --rotary-base "${MODEL_ARGS_ROTARY_BASE:-1000000}"\n)'
    )
    (slime / "scripts/models/qwen3-4B-Instruct-2507.sh").write_text(
        'MODEL_ARGS_ROTARY_BASE=5000000 source "$(dirname -- "${BASH_SOURCE[0]}")/qwen3-4B.sh"'
    )
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, SLIME_DIR=str(slime))
    assert result.returncode == 0, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--num-layers"] == ["36"] and flags["--rotary-base"] == ["5000000"]
    assert result.stdout.split("train command:\n", 1)[1].startswith(f"python3 {slime}/train.py")
    assert "missing (a real run stops here): SLIME_DIR" not in result.stdout


def test_wandb_flags_appear_only_with_a_key_and_the_key_is_never_printed(tmp_path):
    script = ROOT / "scripts/run_qwen2.5_7B_instruct_tau2.sh"
    result = run_script(script, tmp_path, WANDB_API_KEY="k-12345-secret", WANDB_PROJECT="proj")
    assert result.returncode == 0, result.stderr
    flags = train_flags(result.stdout)
    assert "--use-wandb" in flags and flags["--wandb-project"] == ["proj"] and "--wandb-key" not in flags
    assert "k-12345-secret" not in result.stdout + result.stderr


def test_script_arguments_are_appended_to_the_train_command(tmp_path):
    result = run_script(ROOT / "scripts/run_qwen2.5_7B_instruct_tau2.sh", tmp_path, "--num-rollout", "3")
    assert result.returncode == 0, result.stderr
    assert train_flags(result.stdout)["--num-rollout"] == ["300", "3"]  # argparse keeps the last


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_loads_into_tau_config_and_documents_each_key(config):
    result = render(config)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in ("user_sim=local", "user_sim=none")
    data = yaml.safe_load(config.read_text())
    assert all(key.startswith("tau_") for key in data)
    placeholders = {f"${{{name}}}": value for name, value in FILLED.items()}
    filled = {key: placeholders.get(value, value) if isinstance(value, str) else value for key, value in data.items()}
    TauConfig.from_args(SimpleNamespace(**filled))
    lines = config.read_text().splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "#")):
            assert "#" in line or lines[i - 1].startswith("#"), f"{config.name}: {line!r} has no comment"


def test_scripted_user_config_needs_no_server_and_llm_configs_do(tmp_path):
    assert render(ROOT / "configs/tau2_scripted_user.yaml").stdout.strip() == "user_sim=none"
    out = tmp_path / "filled.yaml"
    result = render(ROOT / "configs/qwen3_4B_instruct_2507_tau2.yaml", "--out", str(out))
    assert result.stdout.strip() == "user_sim=local"
    filled = yaml.safe_load(out.read_text())
    assert filled["tau_user_base_url"] == FILLED["USER_SIM_BASE_URL"]
    assert filled["tau_user_model"] == "user-model"
    dry = run_script(
        ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh",
        tmp_path,
        TAU_CONFIG=str(ROOT / "configs/tau2_scripted_user.yaml"),
    )
    assert dry.returncode == 0, dry.stderr
    assert "sglang.launch_server" not in dry.stdout and "no user-simulator server is started" in dry.stdout


def test_a_typo_in_the_config_fails_the_dry_run_with_one_line(tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text((ROOT / "configs/tau2_scripted_user.yaml").read_text().replace("tau_domain:", "tau_domian:"))
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, TAU_CONFIG=str(typo))
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: {typo}: tau_domian ") and "did you mean tau_domain?" in result.stderr
    assert "train command:" not in result.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TRAIN_GPUS": "0,1,2,3", "USER_SIM_GPUS": "3,4"}, "GPU 3 is in both TRAIN_GPUS"),
        ({"TRAIN_GPUS": "0,1,2,3,4,5", "ROLLOUT_BATCH_SIZE": "32"}, "not divisible by the data-parallel size 3"),
        ({"TAU_BENCHMARK": "tau3"}, "TAU_BENCHMARK=tau3 is unknown"),
        ({"MAX_TOKENS_PER_TURN": "20000"}, "must be below ROLLOUT_MAX_CONTEXT_LEN"),
    ],
)
def test_a_bad_layout_fails_before_anything_starts(env, message, tmp_path):
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr


def test_a_real_run_refuses_missing_paths_before_preparing_or_starting_anything(tmp_path):
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    result = run_script(script, tmp_path, DRY_RUN="0")
    assert result.returncode != 0 and result.stderr.startswith("error: SLIME_DIR is not set")
    (tmp_path / "slime").mkdir()
    result = run_script(script, tmp_path, DRY_RUN="0", SLIME_DIR=str(tmp_path / "slime"))
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: missing before a real run: SLIME_DIR/train.py=")
    assert f"HF_CKPT={tmp_path}/ckpt/Qwen3-4B-Instruct-2507 (no such file or directory)" in result.stderr
    assert not (tmp_path / "data").exists()


FAKE_RAY = """\
#!/usr/bin/env bash
# ray's CLI on a GPU node: no cluster yet; `job submit` runs the command after `--` here.
echo "$* | gpus=${CUDA_VISIBLE_DEVICES:-}" >> "$FAKE_RAY_LOG"
case "$1" in
    status) exit 1 ;;
    start | stop) exit 0 ;;
    job) if [[ $2 == submit ]]; then while [[ $1 != -- ]]; do shift; done; shift; exec "$@"; fi ;;
esac
"""

FAKE_LAUNCH_SERVER = """\
# `python -m sglang.launch_server`: our chat user server behind /health, plus a child process like SGLang's.
import argparse, json, os, subprocess, sys, time
from slime_tau_plugin.servers.chat_user_server import ChatUserServer

parser = argparse.ArgumentParser()
parser.add_argument("--host")
parser.add_argument("--port", type=int)
ns, _ = parser.parse_known_args()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
record = {"pid": os.getpid(), "child": child.pid, "argv": sys.argv[1:], "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}
with open(os.environ["FAKE_SGLANG_RECORD"], "w") as fh:
    json.dump(record, fh)
time.sleep(1)  # loading the model


class Server(ChatUserServer):
    def get_routes(self):
        return {**super().get_routes(), "/health": lambda: (200, {})}


Server(host=ns.host, port=ns.port).serve_forever()
"""

FAKE_TRAIN = """\
# slime's train.py: read the τ config it is given and ask the user simulator for the customer's first words.
import argparse, json, os, sys, urllib.request
from types import SimpleNamespace
import yaml
from slime_tau_plugin.config import TauConfig

parser = argparse.ArgumentParser()
for flag in ("--custom-config-path", "--prompt-data", "--eval-config"):
    parser.add_argument(flag)
ns, _ = parser.parse_known_args()
config = TauConfig.from_args(SimpleNamespace(**yaml.safe_load(open(ns.custom_config_path))))
body = {"model": config.user_model, "messages": [{"role": "system", "content": "<scenario>I want a refund</scenario>"}]}
request = urllib.request.Request(
    config.user_base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
)
reply = json.load(urllib.request.urlopen(request, timeout=30))
record = {
    "first_words": reply["choices"][0]["message"]["content"],
    "rows": sum(1 for _ in open(ns.prompt_data)),
    "eval_datasets": [d["name"] for d in yaml.safe_load(open(ns.eval_config))["eval"]["datasets"]],
    "user_model": config.user_model,
}
json.dump(record, open(os.environ["FAKE_TRAIN_RECORD"], "w"))
"""


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_run_prepares_serves_the_user_submits_and_stops_what_it_started(tmp_path):
    pytest.importorskip("tau2")
    fake_bin, fake_py, slime = tmp_path / "bin", tmp_path / "py", tmp_path / "slime"
    for d in (fake_bin, fake_py / "sglang", slime / "scripts/models", tmp_path / "megatron", tmp_path / "user"):
        d.mkdir(parents=True)
    (fake_bin / "ray").write_text(FAKE_RAY)
    (fake_bin / "ray").chmod(0o755)
    (fake_bin / "python3").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')  # the image's python
    (fake_bin / "python3").chmod(0o755)
    (fake_py / "sglang/__init__.py").write_text("")
    (fake_py / "sglang/launch_server.py").write_text(FAKE_LAUNCH_SERVER)
    (slime / "train.py").write_text(FAKE_TRAIN)
    (slime / "scripts/models/qwen3-4B-Instruct-2507.sh").write_text("MODEL_ARGS=(--num-layers 36)\n")
    for name in ("Qwen3-4B-Instruct-2507", "Qwen3-4B-Instruct-2507_torch_dist"):
        (tmp_path / "ckpt" / name).mkdir(parents=True)
    records = {name: tmp_path / f"{name}.json" for name in ("sglang", "train")}
    env = {
        "DRY_RUN": "0",
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "PYTHONPATH": f"{fake_py}:{ROOT}",
        "SLIME_DIR": str(slime),
        "MEGATRON_DIR": str(tmp_path / "megatron"),
        "USER_SIM_MODEL": str(tmp_path / "user"),
        "USER_SIM_PORT": str(free_port()),
        "TRAIN_GPUS": "0,1",
        "USER_SIM_GPUS": "2",
        "TRAIN_SETS": "tau2/retail/train",
        "EVAL_SETS": "tau2/retail/test",
        "FAKE_RAY_LOG": str(tmp_path / "ray.log"),
        "FAKE_SGLANG_RECORD": str(records["sglang"]),
        "FAKE_TRAIN_RECORD": str(records["train"]),
    }
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    server = json.loads(records["sglang"].read_text()) if records["sglang"].exists() else {}
    leftover = [pid for pid in (server.get("pid"), server.get("child")) if pid and is_running(pid)]
    for pid in leftover:  # the script should have stopped them; do not leave them behind when it did not
        os.kill(pid, 9)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert server["gpus"] == "2" and "--served-model-name" in server["argv"] and "user" in server["argv"]
    assert not leftover  # the server and its child: the script stopped the whole process group
    train = json.loads(records["train"].read_text())
    assert train == {
        "first_words": "I want a refund",
        "rows": 74,
        "eval_datasets": ["tau2_retail_test"],
        "user_model": "user",
    }
    ray_calls = [line.split(" | ") for line in (tmp_path / "ray.log").read_text().splitlines()]
    assert [call.split()[:2] for call, _ in ray_calls] == [
        ["status"],
        ["start", "--head"],
        ["job", "submit"],
        ["job", "stop"],
        ["stop"],
    ]
    assert ray_calls[1][1] == "gpus=0,1" and "--num-gpus 2" in ray_calls[1][0]
    filled = yaml.safe_load((tmp_path / "run/tau_config.yaml").read_text())
    assert filled["tau_user_base_url"] == f"http://127.0.0.1:{env['USER_SIM_PORT']}/v1"
    assert "train command:" in (tmp_path / "run/commands.txt").read_text()
