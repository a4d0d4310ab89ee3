"""``scripts/lib/tau_config.py render`` (what every launch dry run calls) refuses what the first ``generate``
would refuse, every problem on its own line, before anything is written (issue 17 rows 9, 10, 18); and the
docs and ignores a fresh clone relies on (rows 11, 19, 20)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.adapters.slime.launch.test_launch_scripts import shared_check_cache  # noqa: F401 - the session's check cache
from tests.tools.cli.test_cli_rollout import error_lines, slime_tau

ROOT = Path(__file__).resolve().parents[4]
RENDER = [sys.executable, str(ROOT / "scripts" / "lib" / "tau_config.py"), "render"]


def render(tmp_path: Path, yaml_text: str) -> subprocess.CompletedProcess:
    config = tmp_path / "v.yaml"
    config.write_text(yaml_text)
    out = tmp_path / "run" / "tau_config.yaml"
    # a hang guard, not a bound: τ loads in ~10 s, and took over 120 s on a 2-core box running six test suites
    done = subprocess.run([*RENDER, str(config), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert not out.exists() or done.returncode == 0, "nothing is written for a refused config"
    return done


def test_dry_run_lists_every_problem_generate_would_refuse(tmp_path):
    done = render(
        tmp_path,
        f"tau_tool_call_parser: qwen3\ntau_split: nope\ntau_tokenizer_path: {tmp_path}\n",
    )
    lines = error_lines(done.stderr)
    assert done.returncode == 2, done.stderr
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines), done.stderr
    assert "tau_tool_call_parser='qwen3' is unknown; expected one of" in lines[0] and "qwen25" in lines[0]
    assert "split='nope' is unknown" in lines[1] and "train" in lines[1]
    assert "holds no tokenizer.json" in lines[2]


def test_a_wrong_type_names_the_key_and_the_expected_type(tmp_path):
    done = render(tmp_path, 'tau_env_workers: "eight"\n')
    assert done.returncode == 2
    assert "tau_env_workers='eight' is invalid; expected an integer" in done.stderr


def test_a_benchmark_that_is_not_installed_is_refused(tmp_path):
    try:
        import tau_bench  # noqa: F401
    except ImportError:
        done = render(tmp_path, "tau_benchmark: tau1\ntau_domain: retail\n")
        assert done.returncode == 0, done.stderr
        missing = [line for line in done.stdout.splitlines() if line.startswith("missing=")]
        assert len(missing) == 1 and "tau1" in missing[0] and "pip install" in missing[0]
        assert not (tmp_path / "run").exists(), "nothing is written while anything is missing"


def test_the_shipped_scripted_user_config_still_passes(tmp_path):
    done = subprocess.run(
        [*RENDER, str(ROOT / "configs" / "tau2_scripted_user.yaml")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "user_sim=none", done.stderr


def test_verbose_is_accepted_after_the_subcommand():
    done = slime_tau(["show", "/nonexistent-run", "-v"])
    assert "unrecognized arguments" not in done.stderr and done.returncode == 2, done.stderr


def test_docs_are_self_contained_and_generated_data_is_ignored():
    docs = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md"))
    assert "docs/ARCHITECTURE.md" in docs
    for doc in ("README.md", *docs, "scripts/slime_loop_check.py"):
        text = (ROOT / doc).read_text()
        assert "../shared/" not in text and "/work/" not in text, doc
    ignored = subprocess.run(["git", "check-ignore", "-q", "data/train.jsonl"], cwd=ROOT)
    assert ignored.returncode == 0, "data/ written by the launch scripts is ignored"


def test_verl_launch_lists_every_missing_model_before_writing_data(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "DATA_DIR": str(tmp_path / "data")}
    env |= {"MODEL_PATH": str(tmp_path / "no-model"), "USER_SIM_MODEL": str(tmp_path / "no-user-model")}
    script = str(ROOT / "scripts" / "run_verl_qwen3_4B_tau2.sh")
    done = subprocess.run(["bash", script], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode != 0
    assert "missing before a real run: MODEL_PATH=" in done.stderr and "USER_SIM_MODEL=" in done.stderr
    assert not (tmp_path / "data").exists(), "nothing is written while anything is missing"
    dry = subprocess.run(["bash", script], capture_output=True, text=True, env={**env, "DRY_RUN": "1"}, timeout=300)
    assert "missing (a real run stops here): MODEL_PATH=" in dry.stdout
    assert "missing (a real run stops here): USER_SIM_MODEL=" in dry.stdout


def test_readme_task_id_examples_name_tasks_that_exist(tau2_backend):
    from slime_tau_plugin.engine.envs import get_backend

    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "cli.md").read_text()  # the examples' pages
    retail_train = {r.task_id for r in get_backend("tau2").task_refs("retail", "train")}
    airline_test = {r.task_id for r in get_backend("tau2").task_refs("airline", "test")}
    assert "--task-ids 13,7 " in text and {"13", "7"} <= retail_train
    assert "show runs/qwen3_airline --task 13 " in text and "13" in airline_test
