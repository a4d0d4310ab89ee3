"""The slime launch scripts (``scripts/run_*.sh`` + ``scripts/lib/``) and their configs, on a CPU box without slime.

Dry runs (``DRY_RUN=1``) must pass with nothing installed but this package: they check paths, the GPU split and
the τ config, and print the commands. One test runs the real path end to end with stand-ins for what a GPU node
provides, each an executable at the process boundary: ``ray`` (a script that runs the submitted command
locally), ``python -m sglang.launch_server`` (our own OpenAI-compatible chat user server plus one child process,
as SGLang has), and slime's ``train.py`` (loads the config it is given and calls the user simulator).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from slime_tau_plugin.adapters.slime.args import config_from_args

ROOT = Path(__file__).resolve().parents[4]
SCRIPTS = sorted(p for p in ROOT.glob("scripts/run_*.sh") if 'tau_main "$@"' in p.read_text())
"""The slime launch scripts: every ``run_*.sh`` that runs the shared ``scripts/lib/tau_launch.sh``'s ``tau_main``."""
CONFIGS = sorted(ROOT.glob("configs/*.yaml"))
FILLED = {"USER_SIM_BASE_URL": "http://127.0.0.1:30010/v1", "USER_SIM_MODEL_NAME": "user-model"}
MISSING = 3
"""A dry run's exit status when it lists missing pieces (here: no slime checkout, no ray, no checkpoints)."""


@pytest.fixture(autouse=True, scope="session")
def shared_check_cache(tmp_path_factory):
    """One cache of the launch checks' τ and SGLang answers for the session (scripts/lib/tau_cache.py): the first
    dry run imports τ² and SGLang's parsers (~10 s here), the others read the answer."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TAU_CHECK_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "launch-check-cache"))
        yield


def run_script(script: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``bash script args`` with a clean environment: no slime, no wandb key, paths under ``tmp_path``."""
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": sys.executable, "DRY_RUN": "1"}
    base.update(DATA_DIR=str(tmp_path / "data"), RUN_DIR=str(tmp_path / "run"), CKPT_ROOT=str(tmp_path / "ckpt"))
    base["TAU_CHECK_CACHE_DIR"] = os.environ.get("TAU_CHECK_CACHE_DIR", str(tmp_path / "check-cache"))
    return subprocess.run(
        ["bash", str(script), *args], env={**base, **env}, capture_output=True, text=True, timeout=180, check=False
    )


def train_flags(stdout: str) -> dict[str, list[str]]:
    """The printed train command as {flag: [values]} (a flag without a value maps to [])."""
    command = stdout.split("train command:\n", 1)[1].split("\n[tau] ", 1)[0]  # up to the dry run's summary line
    words = shlex.split(command.replace("\\\n", " "))
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
    """One dry run per script and benchmark checks everything a preset decides (each run costs CI seconds)."""
    chosen = {"EVAL_TEMPERATURE": "0.3", "EVAL_INTERVAL": "7"} if benchmark == "tau1" else {}
    result = run_script(script, tmp_path, TAU_BENCHMARK=benchmark, **chosen)
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--custom-generate-function-path"] == ["slime_tau_plugin.generate.generate"]
    assert flags["--custom-rollout-log-function-path"] == ["slime_tau_plugin.adapters.slime.metrics.log_rollout"]
    assert flags["--custom-eval-rollout-log-function-path"] == ["slime_tau_plugin.adapters.slime.metrics.log_eval"]
    assert flags["--custom-config-path"] == [str(tmp_path / "run" / "tau_config.yaml")]
    # run safety: advantages over the samples that did not fail, our group filter, metrics over every sample
    assert flags["--custom-reward-post-process-path"] == [
        "slime_tau_plugin.adapters.slime.advantages.post_process_rewards"
    ]
    assert flags["--dynamic-sampling-filter-path"] == ["slime_tau_plugin.adapters.slime.group_filter.keep_group"]
    assert flags["--rollout-all-samples-process-path"] == [
        "slime_tau_plugin.adapters.slime.all_samples.process_all_samples"
    ]
    assert flags["--get-mismatch-metrics"] == [] and flags["--use-tis"] == []  # the recommended setting: TIS on
    assert flags["--custom-tis-function-path"] == [
        "examples.train_infer_mismatch_helper.mis.compute_mis_weights_with_cp"
    ]
    # every script states its eval temperature and cadence (once: a default of its own), and the caller's win
    temperature, interval = chosen.get("EVAL_TEMPERATURE", "1.0"), chosen.get("EVAL_INTERVAL", "10")
    assert flags["--eval-temperature"] == [temperature] and flags["--rollout-temperature"] == ["1.0"]
    assert flags["--eval-interval"] == [interval] and flags["--n-samples-per-eval-prompt"] == ["4"]
    assert "--save-debug-rollout-data" not in flags  # off by default
    # the eval YAML is derived for this run, never an earlier run's copy; its cost is stated: training waits
    assert flags["--eval-config"] == [str(tmp_path / "run" / "eval_config.yaml")]
    assert f"n_samples_per_eval_prompt 4, temperature {temperature}" in result.stdout
    assert "slime's train.py waits for each eval (ray.get), so training stops while it runs" in result.stdout
    assert flags["--prompt-data"] == [str(tmp_path / "data" / f"{benchmark}_train.jsonl")]
    assert flags["--input-key"] == ["index"] and "--apply-chat-template" not in flags
    assert flags["--partial-rollout"] == [] and "--use-wandb" not in flags  # ROLLOUT_MODE=partial by default
    assert "--mask-offpolicy-in-partial-rollout" not in flags and "rollout mode: partial" in result.stdout
    per_turn, context = int(flags["--rollout-max-response-len"][0]), int(flags["--rollout-max-context-len"][0])
    assert 256 <= per_turn <= context // 4  # a per-turn cap, far below the whole-episode bound
    assert flags["--eval-max-response-len"] == [str(per_turn)]
    assert f"leaves {context - 5009:,} of ROLLOUT_MAX_CONTEXT_LEN={context:,}" in result.stdout or benchmark == "tau1"
    assert f"context {benchmark}/retail: prompt ~" in result.stdout  # the budget, in numbers
    assert int(flags["--over-sampling-batch-size"][0]) > int(flags["--rollout-batch-size"][0])
    assert "--colocate" in flags
    # the episode bound fits one training micro-batch (the dry run refuses otherwise)
    cp, per_gpu = int(flags["--context-parallel-size"][0]), int(flags["--max-tokens-per-gpu"][0])
    assert context <= cp * per_gpu
    # thinking is explicit in every preset's config, and said
    config = yaml.safe_load(
        (ROOT / f"configs/{script.stem.removeprefix('run_').removesuffix('_tau2')}_{benchmark}.yaml").read_text()
    )
    thinking = "thinking" in script.stem
    reasoner = ("qwen3-thinking" if "qwen3.5" in script.stem else "qwen3") if thinking else None
    assert config["tau_enable_thinking"] is thinking and config["tau_reasoning_parser"] == reasoner
    assert f"thinking: tau_enable_thinking={thinking}, tau_reasoning_parser={reasoner or 'none'}" in result.stdout
    if thinking:  # longer turns, and the episode bound budgeted per GPU (TP 2, CP 1)
        assert per_turn > 1024 and flags["--max-tokens-per-gpu"] == ["32768"] and context == 32768
    assert "missing (a real run stops here): SLIME_DIR" in result.stdout
    assert result.stdout.rstrip().endswith("a real run stops before it starts anything (exit 3)")
    # the dry run names the prepare call it would make, with this benchmark's sets, and writes nothing
    assert f"prepare --out {tmp_path / 'data'}/{benchmark}_train.jsonl --train {benchmark}/" in result.stdout
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()
    assert "sglang.launch_server" in result.stdout and "--tool-call-parser qwen25" in result.stdout
    assert "plan: 1 node(s) x 8 GPUs named" in result.stdout


def test_model_args_come_from_slimes_own_model_script_and_must_fit_the_checkpoint(tmp_path):
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
    hf = tmp_path / "ckpt/Qwen3-4B-Instruct-2507"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text(json.dumps({"num_hidden_layers": 36, "rope_theta": 5000000}))
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    result = run_script(script, tmp_path, SLIME_DIR=str(slime))
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--num-layers"] == ["36"] and flags["--rotary-base"] == ["5000000"]
    assert result.stdout.split("train command:\n", 1)[1].startswith(f"python3 {slime}/train.py")
    assert "missing (a real run stops here): SLIME_DIR" not in result.stdout
    # the preset is overridable, and a model script that does not fit the checkpoint is refused (rope 1e6 vs 5e6)
    wrong = one_error_line(run_script(script, tmp_path, SLIME_DIR=str(slime), MODEL_SCRIPT="qwen3-4B.sh"))
    assert "MODEL_SCRIPT=qwen3-4B.sh does not fit HF_CKPT (--rotary-base 1000000 vs rope_theta 5000000" in wrong


def test_wandb_flags_script_arguments_and_debug_dumps(tmp_path):
    script = ROOT / "scripts/run_qwen2.5_7B_instruct_tau2.sh"
    env = {"WANDB_API_KEY": "k-12345-secret", "WANDB_PROJECT": "proj", "DEBUG_ROLLOUT_EVERY": "5"}
    result = run_script(script, tmp_path, "--num-rollout", "3", **env)
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    # wandb flags only with a key, and the key is never printed
    assert "--use-wandb" in flags and flags["--wandb-project"] == ["proj"] and "--wandb-key" not in flags
    assert "k-12345-secret" not in result.stdout + result.stderr
    assert flags["--num-rollout"] == ["300", "3"]  # the script's arguments come last: argparse keeps the last
    assert flags["--save-debug-rollout-data"] == [str(tmp_path / "run/debug_rollout/{rollout_id}.pt")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--apply-chat-template"], "--apply-chat-template: the prompt is a task index"),
        (["--input-key", "prompt"], "--input-key prompt: τ rows need --input-key index"),
        (["--use-kl-loss"], "--use-kl-loss: set KL_LOSS_COEF instead"),
        (["--partial-rollout"], "--partial-rollout: set ROLLOUT_MODE"),
    ],
)
def test_a_flag_the_plugin_cannot_serve_is_refused_by_the_dry_run(tmp_path, args, message):
    result = run_script(ROOT / "scripts/run_qwen2.5_7B_instruct_tau2.sh", tmp_path, *args)
    assert message in one_error_line(result) and "train command" not in result.stdout


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_loads_into_tau_config_and_documents_each_key(config):
    result = render(config)
    assert result.returncode == 0, result.stderr
    *missing, verdict = result.stdout.strip().splitlines()
    assert verdict in ("user_sim=local", "user_sim=none")
    assert all(line.startswith(("missing=", "note=")) for line in missing), "only packages this Python lacks"
    data = yaml.safe_load(config.read_text())
    assert all(key.startswith("tau_") for key in data)
    placeholders = {f"${{{name}}}": value for name, value in FILLED.items()}
    filled = {key: placeholders.get(value, value) if isinstance(value, str) else value for key, value in data.items()}
    config_from_args(SimpleNamespace(**filled))
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
    assert dry.returncode == MISSING, dry.stderr
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
    start) [[ $2 != --head ]] || date +%s.%N >"$FAKE_RAY_LOG.head"  # when the head came up
        # a node's `--block` join stays until the test ends it (FAKE_RAY_BLOCK_UNTIL: a file); else it ends at once
        if [[ " $* " == *" --block "* && -n ${FAKE_RAY_BLOCK_UNTIL:-} ]]; then
            echo $$ >"$FAKE_RAY_BLOCK_UNTIL.pid"
            until [[ -e $FAKE_RAY_BLOCK_UNTIL ]]; do sleep 0.2; done
        fi
        exit 0 ;;
    stop) exit 0 ;;
    job) if [[ $2 == submit ]]; then while [[ $1 != -- ]]; do shift; done; shift; exec "$@"; fi ;;
esac
"""

FAKE_LAUNCH_SERVER = """\
# `python -m sglang.launch_server`: our chat user server behind /health, plus a child process like SGLang's.
import argparse, json, os, subprocess, sys, time
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer

parser = argparse.ArgumentParser()
parser.add_argument("--host")
parser.add_argument("--port", type=int)
ns, _ = parser.parse_known_args()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
record = {"pid": os.getpid(), "child": child.pid, "argv": sys.argv[1:], "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}
record["started"] = time.time()
with open(os.environ["FAKE_SGLANG_RECORD"], "w") as fh:
    json.dump(record, fh)
with open(os.environ["FAKE_SGLANG_RECORD"] + ".starts", "a") as fh:  # one line per start (restarts included)
    fh.write(json.dumps(record) + "\\n")
print("loading the model", flush=True)
time.sleep(1)  # loading the model
died = os.environ["FAKE_SGLANG_RECORD"] + ".died"
if os.environ.get("FAKE_SGLANG_DIE_AFTER") and not os.path.exists(died):  # a crash while training runs (OOM kill)
    open(died, "w").close()  # once: the server that takes its place stays up
    import threading

    def crash():  # once training runs (its pid file exists), however slow the box: no race with its start
        trainer = os.environ["FAKE_TRAIN_RECORD"] + ".pid"
        for _ in range(1200):
            if os.path.exists(trainer):
                break
            time.sleep(0.1)
        time.sleep(float(os.environ["FAKE_SGLANG_DIE_AFTER"]))
        print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
        os._exit(7)

    threading.Thread(target=crash, daemon=True).start()


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
from slime_tau_plugin.adapters.slime.args import config_from_args

parser = argparse.ArgumentParser()
for flag in ("--custom-config-path", "--prompt-data", "--eval-config"):
    parser.add_argument(flag)
ns, _ = parser.parse_known_args()
config = config_from_args(SimpleNamespace(**yaml.safe_load(open(ns.custom_config_path))))
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
guard = os.environ["FAKE_TRAIN_RECORD"] + ".guard"
if os.environ.get("FAKE_TRAIN_GUARD") and not os.path.exists(guard):  # once: the failure guard's stop, as slime's
    from slime_tau_plugin.adapters.slime.group_filter import FailureGuard, FailureGuardSettings

    open(guard, "w").close()
    meta = {"termination_reason": "user_error", "failed_endpoint": os.environ["FAKE_TRAIN_GUARD"], "error": "refused"}
    failed = SimpleNamespace(status=SimpleNamespace(name="FAILED"), metadata=meta)
    try:
        FailureGuard(FailureGuardSettings(0.5, 1)).observe([failed] * 4)
    except Exception as exc:  # train.py's ray.get re-raises it from the rollout manager
        print(f"ray.exceptions.RayTaskError({type(exc).__name__}): ray::RolloutManager.generate()", flush=True)
        print(f"{type(exc).__module__}.{type(exc).__name__}: {exc}", flush=True)
        sys.exit(1)
if os.environ.get("FAKE_TRAIN_SLEEP"):  # a long training job
    import time

    with open(os.environ["FAKE_TRAIN_RECORD"] + ".pid", "w") as fh:
        fh.write(str(os.getpid()))
    until = os.environ.get("FAKE_TRAIN_UNTIL")  # or until the test says so, then the user is asked again
    for _ in range(int(float(os.environ["FAKE_TRAIN_SLEEP"]) * 10)):
        if until and os.path.exists(until):
            reply = json.load(urllib.request.urlopen(request, timeout=30))
            record["again"] = reply["choices"][0]["message"]["content"]
            json.dump(record, open(os.environ["FAKE_TRAIN_RECORD"], "w"))
            break
        time.sleep(0.1)
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


def fake_node(tmp_path: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """A GPU node's executables as stand-ins (ray, SGLang's launch_server, slime's train.py): the env and records."""
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
    (slime / "examples/train_infer_mismatch_helper").mkdir(parents=True)
    (slime / "examples/train_infer_mismatch_helper/mis.py").write_text("")
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
        "TAU_WATCH_INTERVAL_S": "0.5",
    }
    return env, records


def test_real_run_prepares_serves_the_user_submits_and_stops_what_it_started(tmp_path):
    pytest.importorskip("tau2")
    env, records = fake_node(tmp_path)
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
    # the keys slime's mismatch helper reads are appended to the run copy (TIS itself is slime's --use-tis flag), and
    # the recommended lag limit (ROLLOUT_MODE=partial: configs/slime/off_policy.yaml)
    assert filled["tis_upper_bound"] == 2.0 and filled["use_rs"] is False and "use_tis" not in filled
    assert filled["tau_max_weight_lag"] == 1
    assert "train command:" in (tmp_path / "run/commands.txt").read_text()
    eval_yaml = yaml.safe_load((tmp_path / "run/eval_config.yaml").read_text())
    assert [d["n_samples_per_eval_prompt"] for d in eval_yaml["eval"]["datasets"]] == [4]
    assert not (tmp_path / ".launch_state/pids").exists(), "a clean exit leaves no recorded PIDs behind"


def test_a_worker_node_serves_its_user_simulator_and_joins_the_heads_ray_cluster(tmp_path):
    env, records = fake_node(tmp_path)
    head = socket.socket()  # the head's Ray port: node 1 waits until it answers, then joins
    head.bind(("127.0.0.2", 0))
    head.listen()
    port = head.getsockname()[1]
    env.update(NODE_ADDRS="127.0.0.2,127.0.0.1", NODE_RANK="1", RAY_PORT=str(port))  # this is node 1 (127.0.0.1)
    env.update(SHARED_STORAGE="1")  # SAVE under tmp_path stands for the shared folder a real cluster mounts
    try:
        result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    finally:
        head.close()
    server = json.loads(records["sglang"].read_text()) if records["sglang"].exists() else {}
    leftover = [pid for pid in (server.get("pid"), server.get("child")) if pid and is_running(pid)]
    for pid in leftover:
        os.kill(pid, 9)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert server["gpus"] == "2" and server["argv"][server["argv"].index("--host") + 1] == "0.0.0.0"
    assert not leftover, "the node's user simulator is stopped when its Ray node ends"
    ray_calls = [line.split(" | ") for line in (tmp_path / "ray.log").read_text().splitlines()]
    join = f"start --address 127.0.0.2:{port} --num-gpus 2 --disable-usage-stats --node-ip-address 127.0.0.1 --block"
    assert [call for call, _ in ray_calls] == [join, "stop"] and ray_calls[0][1] == "gpus=0,1"
    assert not records["train"].exists(), "no job on a worker"
    # the task rows are written on this node too: slime may place its rollout manager (which reads them) here
    rows = (tmp_path / "data/tau2_train.jsonl").read_text().splitlines()
    assert len(rows) == 74 and (tmp_path / "data/tau2_retail_test.jsonl").exists()
    assert not (tmp_path / "run/eval_config.yaml").exists(), "the eval YAML is the head's (train.py reads it)"


# ---- issue 19: budgets, GPU splits, eval YAML, hosted user, watchdog, stale processes, resume, multi-node ----


def bash_lib(body: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``body`` run after sourcing ``scripts/lib/tau_launch.sh`` (its functions, tested in isolation)."""
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": sys.executable, "RUN_NAME": "test_run"}
    base["TAU_STATE_DIR"] = str(tmp_path / "state")
    script = f"set -euo pipefail\nsource {shlex.quote(str(ROOT / 'scripts/lib/tau_launch.sh'))}\n{body}"
    return subprocess.run(
        ["bash", "-c", script], env={**base, **env}, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_qwen35_preset_reads_xml_calls_from_a_prompt_that_opens_its_reasoning(tmp_path):
    """Qwen3.5/3.6: SGLang's qwen3_coder parser, qwen3-thinking (the prompt opens <think>), budgets for thinking."""
    script = ROOT / "scripts/run_qwen3.5_4B_thinking_tau2.sh"
    result = run_script(script, tmp_path)
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--rollout-max-response-len"] == ["8192"] and flags["--rollout-max-context-len"] == ["32768"]
    for benchmark in ("tau2", "tau1"):
        config = yaml.safe_load((ROOT / f"configs/qwen3.5_4B_thinking_{benchmark}.yaml").read_text())
        assert (config["tau_tool_call_parser"], config["tau_reasoning_parser"]) == ("qwen3_coder", "qwen3-thinking")
        assert config["tau_enable_thinking"] is True


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_budget_check_refuses_an_episode_longer_than_a_micro_batch(tmp_path):
    script = ROOT / "scripts/run_qwen3_8B_thinking_tau2.sh"
    # the 8B thinking preset before issue 19: 32768-token episodes, 16384 tokens per GPU, no context parallelism
    before = run_script(script, tmp_path, MAX_TOKENS_PER_GPU="16384")
    line = one_error_line(before)
    assert "ROLLOUT_MAX_CONTEXT_LEN=32768 exceeds CP_SIZE*MAX_TOKENS_PER_GPU=1*16384=16384" in line
    assert "alone in one micro-batch of up to 32768 tokens per GPU" in line and "train command:" not in before.stdout
    # context parallelism splits the sequence: CP 2 x 16384 fits (on 4 training GPUs: TP 2 x CP 2)
    cp2 = run_script(script, tmp_path, MAX_TOKENS_PER_GPU="16384", CP_SIZE="2", TRAIN_GPUS="0,1,2,3")
    assert cp2.returncode == MISSING, cp2.stderr  # the preset as shipped: test_dry_run_prints_a_complete_train_command


def test_all_eight_gpus_train_with_a_scripted_user_when_user_sim_gpus_is_emptied(tmp_path):
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    scripted = str(ROOT / "configs/tau2_scripted_user.yaml")
    result = run_script(script, tmp_path, TAU_CONFIG=scripted, TRAIN_GPUS="0,1,2,3,4,5,6,7", USER_SIM_GPUS="")
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--actor-num-gpus-per-node"] == ["8"] and flags["--rollout-num-gpus"] == ["8"]
    assert "sglang.launch_server" not in result.stdout and "stay idle" not in result.stdout
    # not emptied: the scripted user needs none of them, said once, and nothing fails on the overlap
    kept = run_script(script, tmp_path, TAU_CONFIG=scripted, TRAIN_GPUS="0,1,2,3,4,5,6,7")
    assert kept.returncode == MISSING and "USER_SIM_GPUS=6,7 stay idle" in kept.stdout, kept.stderr
    # an LLM user served by this script needs GPUs of its own
    line = one_error_line(run_script(script, tmp_path, TRAIN_GPUS="0,1,2,3,4,5,6,7", USER_SIM_GPUS=""))
    assert "asks for the user-simulator server, but USER_SIM_GPUS is empty" in line


def test_colocate_0_works_on_the_default_split_or_fails_with_one_line(tmp_path):
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    result = run_script(script, tmp_path, COLOCATE="0")
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    # 6 GPUs: half rounded up to whole TP-2 replicas trains (4, data-parallel 2), the other 2 run rollout engines
    assert flags["--actor-num-gpus-per-node"] == ["4"] and flags["--rollout-num-gpus"] == ["2"]
    assert "--colocate" not in flags
    line = one_error_line(run_script(script, tmp_path, COLOCATE="0", TRAIN_GPUS="0,1", USER_SIM_GPUS="2"))
    assert "COLOCATE=0 splits TRAIN_GPUS=0,1 into ACTOR_GPUS=2" in line and "0 for rollout engines" in line


def test_the_eval_yaml_is_derived_on_every_run_from_the_current_variables(tmp_path):
    train = tmp_path / "data/tau2_train.jsonl"
    body = 'tau_eval_config_check && tau_write_eval_config && cat "$EVAL_CONFIG_RUN"'
    common = {
        "DRY_RUN": "0",
        "EVAL_CONFIG": "",
        "EVAL_SETS": "tau2/retail,airline/test",
        "TRAIN_DATA": str(train),
        "RUN_DIR": str(tmp_path / "run"),
        "EVAL_TEMPERATURE": "0.6",
        "EVAL_INTERVAL": "5",
    }
    first = bash_lib(body, tmp_path, N_SAMPLES_PER_EVAL_PROMPT="4", **common)
    assert first.returncode == 0, first.stderr
    second = bash_lib(body, tmp_path, N_SAMPLES_PER_EVAL_PROMPT="8", **common)  # the second run changes N
    assert second.returncode == 0, second.stderr
    data = yaml.safe_load((tmp_path / "run/eval_config.yaml").read_text())
    datasets = data["eval"]["datasets"]
    assert [d["name"] for d in datasets] == ["tau2_retail_test", "tau2_airline_test"]
    assert [d["n_samples_per_eval_prompt"] for d in datasets] == [8, 8]
    assert datasets[0]["path"] == str(tmp_path / "data/tau2_retail_test.jsonl")
    assert "n_samples_per_eval_prompt 8, temperature 0.6, before step 0 and every 5 rollouts" in second.stdout
    # a YAML given as EVAL_CONFIG that says another sample count is refused, not silently preferred by slime
    given = tmp_path / "given.yaml"
    given.write_text(yaml.safe_dump(data))
    mismatch = bash_lib(body, tmp_path, **{**common, "EVAL_CONFIG": str(given), "N_SAMPLES_PER_EVAL_PROMPT": "4"})
    line = one_error_line(mismatch)
    assert "n_samples_per_eval_prompt tau2_retail_test: 8" in line and "N_SAMPLES_PER_EVAL_PROMPT=4" in line


def test_existing_train_rows_with_new_eval_sets_name_the_prepare_command(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data/tau2_train.jsonl").write_text("")
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, EVAL_SETS="tau2/retail/test")
    line = one_error_line(result)
    assert "tau2_retail_test.jsonl" in line and "prepare --out" in line and line.endswith("--force")


def hosted_config(tmp_path: Path, port: int) -> Path:
    config = tmp_path / "hosted.yaml"
    text = (ROOT / "configs/qwen3_4B_instruct_2507_tau2.yaml").read_text()
    text = text.replace('"${USER_SIM_BASE_URL}"', f"http://127.0.0.1:{port}/v1")
    text = text.replace('"${USER_SIM_MODEL_NAME}"', "scripted-user")
    config.write_text(text.replace("tau_user_api_key_env: null", "tau_user_api_key_env: TAU_TEST_USER_KEY"))
    return config


def test_a_hosted_user_endpoint_is_preflighted_in_the_dry_run(tmp_path):
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    port = free_port()
    config = str(hosted_config(tmp_path, port))
    unset = one_error_line(run_script(script, tmp_path, TAU_CONFIG=config))
    assert "tau_user_api_key_env names TAU_TEST_USER_KEY, but TAU_TEST_USER_KEY is not set" in unset
    down = one_error_line(run_script(script, tmp_path, TAU_CONFIG=config, TAU_TEST_USER_KEY="k"))
    assert f"does not answer GET http://127.0.0.1:{port}/v1/models" in down
    code = (
        "from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer\n"
        f"ChatUserServer(host='127.0.0.1', port={port}).serve_forever()"
    )
    server = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        for _ in range(100):
            up = run_script(script, tmp_path, TAU_CONFIG=config, TAU_TEST_USER_KEY="k", USER_SIM_GPUS="")
            if up.returncode == MISSING:
                break
        assert up.returncode == MISSING, up.stderr
        assert "hosted endpoint, which answered GET /models" in up.stdout
        assert "sglang.launch_server" not in up.stdout and "k-" not in up.stdout
    finally:
        server.kill()
        server.wait()


WATCH = """\
TAU_PROC_NAMES=() TAU_PROC_PIDS=() TAU_PROC_LOGS=()
tau_maintain() { :; }
tau_start_process "the user-simulator server" user_sim "$LOG" bash -c "$USER_CMD"
sleep 60 &
main=$!
trap 'kill $main 2>/dev/null || true' EXIT
start=$SECONDS
tau_watch "$main" || echo "main ended: $?"
echo "watched for $((SECONDS - start))s"
"""


def test_the_watchdog_stops_the_run_with_the_log_tail_of_a_process_that_died(tmp_path):
    log = tmp_path / "run/user_sim.log"
    dies = "for i in $(seq 1 30); do echo loading $i; done; echo 'CUDA out of memory'; sleep 1; exit 3"
    result = bash_lib(WATCH, tmp_path, LOG=str(log), USER_CMD=dies, TAU_WATCH_INTERVAL_S="0.2")
    assert result.returncode == 1 and "watched for" not in result.stdout, result.stdout
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: the user-simulator server (pid ") and "exited with status 3" in lines[0]
    assert f"the run stops. Last 20 lines of {log}:" in lines[0]
    assert lines[1:] == [f"  | loading {i}" for i in range(12, 31)] + ["  | CUDA out of memory"]
    pid = lines[0].split("(pid ", 1)[1].split(")", 1)[0]
    assert f"user_sim {pid} " in (tmp_path / "state/pids").read_text()  # recorded for the next run's stale check
    # a helper that keeps running does not stop the run: the watch returns the main process's status
    ok = bash_lib(
        WATCH.replace("sleep 60", "sleep 1"), tmp_path, LOG=str(log), USER_CMD="sleep 30", TAU_WATCH_INTERVAL_S="0.2"
    )
    assert ok.returncode == 0 and "watched for" in ok.stdout, ok.stderr
    helper = int((tmp_path / "state/pids").read_text().splitlines()[-1].split()[1])
    os.killpg(helper, 9)


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def orphan_sleep() -> int:
    """A ``sleep`` in its own session whose parent has exited, like a server left behind by a crashed launch."""
    out = subprocess.run(["setsid", "sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    return int(out.stdout.strip())


def test_stale_processes_of_a_crashed_run_are_named_with_the_command_or_cleaned(tmp_path):
    stale = orphan_sleep()
    try:
        state = tmp_path / "state"
        state.mkdir()
        pids = state / "pids"
        dead = subprocess.Popen(["true"])
        dead.wait()
        record = (
            f"launcher {dead.pid} - crashed_run -\nuser_sim {stale} {start_time(stale)} crashed_run /x/user_sim.log\n"
        )
        pids.write_text(record)
        line = one_error_line(bash_lib("tau_check_stale", tmp_path, CLEAN_STALE="0"))
        assert f"the user_sim process of crashed_run (pid {stale}, log /x/user_sim.log) is still running" in line
        assert f"stop it with: kill -- -{stale} (or rerun with CLEAN_STALE=1)" in line
        assert is_running(stale) and pids.exists()
        # a reused PID (another start time) is not mistaken for the server
        pids.write_text(f"user_sim {stale} 1 crashed_run /x/user_sim.log\n")
        assert bash_lib("tau_check_stale", tmp_path, CLEAN_STALE="0").returncode == 0 and is_running(stale)
        # a launcher that still runs is another live launch: refused whatever CLEAN_STALE says
        pids.write_text(f"launcher {stale} {start_time(stale)} live_run -\n")
        line = one_error_line(bash_lib("tau_check_stale", tmp_path, CLEAN_STALE="1"))
        assert f"another launch (live_run, pid {stale}) is still running" in line
        pids.write_text(record)
        cleaned = bash_lib("tau_check_stale", tmp_path, CLEAN_STALE="1")
        assert cleaned.returncode == 0, cleaned.stderr
        assert not is_running(stale) and not pids.exists()
        assert "CLEAN_STALE=1: stopping the user_sim process of crashed_run" in cleaned.stdout
    finally:
        if is_running(stale):
            os.kill(stale, 9)


def test_checkpoints_and_debug_rollout_dumps_are_pruned(tmp_path):
    save = tmp_path / "save"
    for it in (20, 40, 60, 80, 100):
        (save / f"iter_{it:07d}").mkdir(parents=True)
    (save / "latest_checkpointed_iteration.txt").write_text("80\n")  # iter_0000100 is still being written
    dumps = tmp_path / "debug_rollout"
    dumps.mkdir()
    for name in [*(f"{i}.pt" for i in range(8)), "eval_0.pt"]:
        (dumps / name).write_text("")
    body = f"tau_prune_checkpoints {save} 2 && tau_prune_debug_rollouts {dumps} 3"
    result = bash_lib(body, tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in save.glob("iter_*")) == ["iter_0000060", "iter_0000080", "iter_0000100"]
    assert sorted(p.name for p in dumps.iterdir()) == ["0.pt", "3.pt", "6.pt", "7.pt", "eval_0.pt"]
    assert bash_lib(f"tau_prune_checkpoints {save} 0", tmp_path).returncode == 0  # 0 keeps all
    assert len(list(save.glob("iter_*"))) == 3


def test_a_resumed_run_keeps_its_wandb_run_and_says_it_resumes(tmp_path):
    save = tmp_path / "ckpt/Qwen3-4B-Instruct-2507_slime_tau2"
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    fresh = run_script(script, tmp_path, WANDB_API_KEY="secret-key")
    assert fresh.returncode == MISSING and "checkpoints: none in LOAD=" in fresh.stdout, fresh.stderr
    assert "wandb: new run" in fresh.stdout
    save.mkdir(parents=True)
    (save / "latest_checkpointed_iteration.txt").write_text("40\n")
    Path(f"{save}.wandb_run_id").write_text("abc123xy\n")
    resumed = run_script(script, tmp_path, WANDB_API_KEY="secret-key")
    assert resumed.returncode == MISSING, resumed.stderr
    assert f"checkpoints: {save} holds iteration 40; the run resumes from it" in resumed.stdout
    assert "wandb: resuming run abc123xy" in resumed.stdout
    runtime_env = json.loads(shlex.split(resumed.stdout.split("--runtime-env-json ", 1)[1])[0])
    assert runtime_env["env_vars"]["WANDB_RUN_ID"] == "abc123xy" and runtime_env["env_vars"]["WANDB_RESUME"] == "allow"
    assert "secret-key" not in resumed.stdout + resumed.stderr


def test_two_nodes_of_eight_gpus_print_a_per_node_plan_with_a_user_simulator_on_each(tmp_path):
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    result = run_script(script, tmp_path, NODE_ADDRS="10.0.0.1,10.0.0.2")
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert flags["--actor-num-nodes"] == ["2"] and flags["--actor-num-gpus-per-node"] == ["6"]
    assert flags["--rollout-num-gpus"] == ["12"] and flags["--num-gpus-per-node"] == ["6"]
    out = result.stdout
    urls = "http://10.0.0.1:30010/v1,http://10.0.0.2:30010/v1"
    assert "plan: 2 node(s) x 8 GPUs named; head: node 0 at 10.0.0.1 (Ray 10.0.0.1:6379); this is node 0" in out
    for rank, addr in enumerate(["10.0.0.1", "10.0.0.2"]):
        node = f"  node {rank} ({addr}{', head' if rank == 0 else ''}): GPUs 0,1,2,3,4,5: train (Megatron) and roll out"
        assert node in out and f"GPUs 6,7: user simulator (SGLang, TP 2) at http://{addr}:30010/v1" in out
    assert (
        "training: 12 GPUs on 2 node(s) = TP 2 x CP 1 x data-parallel 6; rollout: 12 SGLang engine(s) of 1 GPU" in out
    )
    assert f"user simulators: 2; rollouts get tau_user_base_url={urls}" in out
    assert f"its LLM user is the server(s) this script starts ({urls})" in out
    assert "--host 0.0.0.0 --port 30010" in out  # bound on every interface of its node
    # the other node runs the same script with its rank; the exact ray command it runs there is printed
    assert "  on node 1: NODE_RANK=1 NODE_ADDRS=10.0.0.1,10.0.0.2 bash " in out
    join = "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 ray start --address 10.0.0.1:6379 --num-gpus 6 --disable-usage-stats"
    assert f"    {join} --node-ip-address 10.0.0.2 --block" in out
    assert "KL loss: off (KL_LOSS_COEF=0): no reference model is loaded or run" in out
    assert "context tau2/retail: prompt ~5,009 tokens leaves 11,375 of ROLLOUT_MAX_CONTEXT_LEN=16,384" in out
    # node 1's own dry run: its user simulator and its ray join, no job
    worker = run_script(script, tmp_path, NODE_ADDRS="10.0.0.1,10.0.0.2", NODE_RANK="1")
    assert worker.returncode == MISSING, worker.stderr
    assert "this is node 1" in worker.stdout and "train command:" not in worker.stdout
    assert "rollouts reach it at http://10.0.0.2:30010/v1" in worker.stdout and join in worker.stdout
    # one user simulator, on the head: the other node's user GPUs are said to be idle
    head_only = run_script(script, tmp_path, NUM_NODES="2", MASTER_ADDR="10.0.0.1", USER_SIM_NODES="head")
    assert head_only.returncode == MISSING, head_only.stderr
    assert "node 1 (<node 1>): GPUs 0,1,2,3,4,5" in head_only.stdout
    assert "GPUs 6,7: idle (USER_SIM_NODES=head)" in head_only.stdout
    assert "tau_user_base_url=http://10.0.0.1:30010/v1 " in head_only.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"NUM_NODES": "2"}, "NUM_NODES=2 needs the head node's address that the other nodes reach"),
        ({"NUM_NODES": "2", "MASTER_ADDR": "10.0.0.1"}, "USER_SIM_NODES=all on NUM_NODES=2 starts a user simulator"),
        ({"NODE_ADDRS": "10.0.0.1,10.0.0.2", "NUM_NODES": "3"}, "lists 2 addresses, NUM_NODES=3"),
        ({"NODE_ADDRS": "10.0.0.1,10.0.0.2", "NODE_RANK": "2"}, "NODE_RANK=2; expected 0 (the head) to 1"),
        ({"NODE_ADDRS": "10.0.0.1,10.0.0.1"}, "NODE_ADDRS=10.0.0.1,10.0.0.1 lists 10.0.0.1 twice; list each node's"),
        ({"TRAIN_GPUS": "0,1,2,3,4"}, "TRAIN_GPUS=0,1,2,3,4 gives 5 training GPUs, not a multiple of TP_SIZE"),
    ],
)
def test_a_node_layout_that_cannot_run_is_refused(tmp_path, env, message):
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    assert message in one_error_line(result)


def test_a_benchmark_that_is_not_installed_is_listed_as_missing_and_the_dry_run_fails(tmp_path):
    shadow = tmp_path / "shadow/tau_bench"  # τ-bench v1 absent: its import fails as on a machine without it
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'tau_bench'\")\n")
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    result = run_script(script, tmp_path, TAU_BENCHMARK="tau1", PYTHONPATH=str(tmp_path / "shadow"))
    assert result.returncode == MISSING, result.stderr
    missing = [line for line in result.stdout.splitlines() if "missing (a real run stops here):" in line]
    assert any("tau1" in line and "pip install" in line for line in missing), missing
    ray_missing = any(
        line.endswith("ray (not on PATH; run inside slime's image slimerl/slime or install slime's requirements)")
        for line in missing
    )
    assert ray_missing == (shutil.which("ray") is None), "ray is listed like τ-bench v1 when it is absent"
    assert "is valid" not in result.stdout and "loads into TauConfig, but its run needs" in result.stdout


FULLY_ASYNC = "slime.rollout.fully_async_rollout.generate_rollout_fully_async"


@pytest.mark.parametrize(
    ("mode", "env", "entry", "wanted", "absent"),
    [
        (
            "partial",
            {},
            "train.py",
            ["--partial-rollout", "--use-tis", "--colocate"],
            ["--mask-offpolicy-in-partial-rollout"],
        ),
        (
            "partial",
            {"CURRICULUM": "1"},
            "train.py",
            ["--partial-rollout", "--data-source-path"],
            ["--mask-offpolicy-in-partial-rollout"],
        ),
        (
            "partial",
            {"MASK_OFFPOLICY": "1", "USE_TIS": "0"},
            "train.py",
            ["--partial-rollout", "--mask-offpolicy-in-partial-rollout"],
            ["--use-tis"],
        ),
        ("default", {}, "train.py", ["--dynamic-sampling-filter-path"], ["--partial-rollout", "--use-tis"]),
        (
            "fully_async",
            {},
            "train_async.py",
            ["--partial-rollout", "--use-tis", "--rollout-function-path"],
            ["--colocate", "--dynamic-sampling-filter-path", "--mask-offpolicy-in-partial-rollout"],
        ),
    ],
)
def test_rollout_mode_switches_slimes_flags_and_entry_point(tmp_path, mode, env, entry, wanted, absent):
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    result = run_script(script, tmp_path, ROLLOUT_MODE=mode, **env)
    assert result.returncode == MISSING, result.stderr
    command = result.stdout.split("train command:\n", 1)[1]
    assert shlex.split(command.replace("\\\n", " "))[1].endswith("/" + entry)
    flags = train_flags(result.stdout)
    assert all(flag in flags for flag in wanted), [f for f in wanted if f not in flags]
    assert not any(flag in flags for flag in absent), [f for f in absent if f in flags]
    if "--data-source-path" in flags:  # CURRICULUM=1: slime's own data-source hook; the record's writer stays on
        assert flags["--data-source-path"] == ["slime_tau_plugin.adapters.slime.curriculum.TauCurriculumDataSource"]
        assert flags["--rollout-all-samples-process-path"] == [
            "slime_tau_plugin.adapters.slime.all_samples.process_all_samples"
        ]
    else:
        assert "--data-source-path" not in flags  # off by default: slime's own data source
    if mode == "fully_async":  # slime's eval would default to the fully-async function, which refuses evaluation
        assert flags["--rollout-function-path"] == [FULLY_ASYNC]
        assert flags["--eval-function-path"] == ["slime.rollout.sglang_rollout.generate_rollout"]
        assert flags["--custom-reward-post-process-path"] == [
            "slime_tau_plugin.adapters.slime.advantages.post_process_rewards"
        ]  # where the failure guard sees every group when no dynamic filter runs


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ROLLOUT_MODE": "sync"}, "ROLLOUT_MODE=sync is unknown; expected default, partial or fully_async"),
        ({"ROLLOUT_MODE": "fully_async", "COLOCATE": "1"}, "refuses --colocate: set COLOCATE=0"),
        ({"ROLLOUT_MODE": "partial", "MASK_OFFPOLICY": "yes"}, "MASK_OFFPOLICY=yes; expected 1 or 0"),
        ({"CURRICULUM": "yes"}, "CURRICULUM=yes; expected 0 (off) or 1"),
        (
            {"CURRICULUM": "1", "ROLLOUT_MODE": "fully_async", "COLOCATE": "0"},
            "CURRICULUM=1 needs the per-task record, which slime's fully-async rollout never feeds",
        ),
        ({"USE_TIS": "on"}, "USE_TIS=on; expected 1 or 0"),
    ],
)
def test_a_rollout_mode_the_scripts_cannot_serve_is_refused_by_the_dry_run(tmp_path, env, message):
    result = run_script(ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh", tmp_path, **env)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "train command" not in result.stdout


@pytest.mark.parametrize(("coef", "loaded"), [("0.0", False), ("0.01", True)])
def test_a_zero_kl_coefficient_loads_no_reference_model(tmp_path, coef, loaded):
    """slime loads and runs a reference model whenever --use-kl-loss is given, even with coefficient 0."""
    script = ROOT / "scripts/run_qwen3_4B_instruct_2507_tau2.sh"
    short = {"ROLLOUT_MAX_CONTEXT_LEN": "9000"} if loaded else {}  # this run also checks the budget warning
    result = run_script(script, tmp_path, KL_LOSS_COEF=coef, **short)
    assert result.returncode == MISSING, result.stderr
    flags = train_flags(result.stdout)
    assert ("--use-kl-loss" in flags) is loaded
    if loaded:
        assert flags["--kl-loss-coef"] == [coef] and flags["--kl-loss-type"] == ["low_var_kl"]
    assert ("no reference model" in result.stdout) is not loaded
    # retail's ~5k-token prompt + its p90 reference solution (~5.1k) do not fit 9000 tokens: said, with numbers
    warning = "WARNING: tau2/retail: ROLLOUT_MAX_CONTEXT_LEN=9,000 cuts typical episodes: prompt 5,009 + p90"
    assert (warning in result.stdout) is loaded
    assert "WARNING: tau2/airline" not in result.stdout and "WARNING: tau2/telecom" not in result.stdout  # they fit
    bad = run_script(script, tmp_path, KL_LOSS_COEF="-1")
    assert bad.returncode != 0 and "KL_LOSS_COEF=-1; expected a number >= 0" in bad.stderr


ATTEMPTS = """\
MAX_RESTARTS=2 RESTART_DELAY_S=0 NODE_RANK=0 LOAD=/ckpt RUN_NAME=test_run RUN_DIR=$TMP
read -r -a CODES <<<"$CODES"
attempt() { echo "$TAU_ATTEMPT" >>"$TMP/attempts"; exit "${CODES[$TAU_ATTEMPT]}"; }
tau_supervise attempt || echo "supervised: $?"
"""


@pytest.mark.parametrize(
    ("codes", "status", "attempts"),
    [
        ("75 75 0", None, 3),  # two crashes, then a clean end: resumed twice
        ("75 4", "4", 2),  # the failure guard stopped the run on an endpoint the launcher cannot restart
        ("76 0", None, 2),  # ... on one it serves: the attempt restarts (issue 34 §2)
        ("76 76 76", "4", 3),  # ... counted against MAX_RESTARTS, then a stop
        ("75 75 75", "75", 3),  # MAX_RESTARTS=2 used up: the run's status is the crash's (docs: 75)
        ("1", "1", 1),  # refused before anything started
        ("130", "130", 1),  # Ctrl-C
    ],
)
def test_a_crashed_run_is_restarted_but_not_after_the_failure_guards_stop(tmp_path, codes, status, attempts):
    result = bash_lib(ATTEMPTS, tmp_path, TMP=str(tmp_path), CODES=codes)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "attempts").read_text().split() == [str(i) for i in range(attempts)]
    assert (f"supervised: {status}" in result.stdout) if status else ("supervised" not in result.stdout)
    if codes.startswith(("75", "76")):
        assert "restart 1 of 2 in 0s, resuming from the newest checkpoint in LOAD=/ckpt" in result.stdout


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_supervised_attempt_and_no_restart_follows(tmp_path):
    body = """\
MAX_RESTARTS=2 RESTART_DELAY_S=0 NODE_RANK=0 LOAD=/ckpt RUN_NAME=test_run RUN_DIR=$TMP
attempt() {
    trap 'kill $! 2>/dev/null; echo stopped >>"$TMP/attempts"; exit 143' TERM
    echo started >>"$TMP/attempts"
    sleep 60 & wait
}
tau_supervise attempt || echo "supervised: $?"
"""
    script = f"set -euo pipefail\nsource {shlex.quote(str(ROOT / 'scripts/lib/tau_launch.sh'))}\n{body}"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMP": str(tmp_path), "TAU_STATE_DIR": str(tmp_path)}
    proc = subprocess.Popen(  # Ctrl-C's default disposition, even where the test runner was started with it ignored
        ["bash", "-c", script], env=env, stdout=subprocess.PIPE, text=True, preexec_fn=_default_sigint
    )
    attempts = tmp_path / "attempts"
    for _ in range(600):  # until the attempt runs, however slow the box
        if attempts.exists():
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "supervised: 130" in out and attempts.read_text().split() == ["started", "stopped"]


def test_an_attempt_tells_the_failure_guards_stop_from_a_crash(tmp_path):
    """The exit status an attempt reports (tau_cleanup): the supervisor restarts only TAU_EXIT_CRASH (75)."""
    body = (
        "RUN_DIR=$TMP TAU_PROC_PIDS=() TAU_RAY_STARTED=$STARTED TAU_JOB_SUBMITTED=1; "
        'echo "status $(tau_exit_status "$RC")"'
    )
    traceback = "Traceback ...\nslime_tau_plugin.reporting.failure_guard.FailureGuardError: ...\n"
    (tmp_path / "train.log").write_text(traceback)
    guard = bash_lib(body, tmp_path, TMP=str(tmp_path), STARTED="1", RC="1")
    assert "status 4" in guard.stdout and "the failure guard stopped the run" in guard.stderr
    (tmp_path / "train.log").write_text("RuntimeError: NCCL timeout\n")
    assert "status 75" in bash_lib(body, tmp_path, TMP=str(tmp_path), STARTED="1", RC="1").stdout
    assert "status 1" in bash_lib(body, tmp_path, TMP=str(tmp_path), STARTED="0", RC="1").stdout  # nothing started
    assert "status 143" in bash_lib(body, tmp_path, TMP=str(tmp_path), STARTED="1", RC="143").stdout


def load_tau_cache():
    spec = importlib.util.spec_from_file_location("tau_cache", ROOT / "scripts/lib/tau_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_check_cache_answers_only_for_the_same_inputs_and_environment(tmp_path, monkeypatch):
    tau_cache = load_tau_cache()
    monkeypatch.setenv("TAU_CHECK_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[int] = []

    def compute() -> dict:
        calls.append(1)
        return {"answer": len(calls)}

    assert tau_cache.cached("k", {"a": 1}, compute) == {"answer": 1}
    assert tau_cache.cached("k", {"a": 1}, compute) == {"answer": 1}  # stored
    assert tau_cache.cached("k", {"a": 2}, compute) == {"answer": 2}  # other inputs
    monkeypatch.setenv("TAU2_DATA_DIR", str(tmp_path))  # another τ² data folder: another environment
    assert tau_cache.cached("k", {"a": 1}, compute) == {"answer": 3}
    monkeypatch.setenv("TAU_CHECK_CACHE", "0")
    assert tau_cache.cached("k", {"a": 1}, compute) == {"answer": 4}
