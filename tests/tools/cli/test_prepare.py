"""``slime-tau prepare`` as a user runs it: training mixtures, eval sets with slime's eval YAML, refusals.

Refusals run the real command in a subprocess: what matters there is the exit status and a single stderr
line without a traceback.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slime_tau_plugin.adapters.slime.generate import generate
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import TaskSet, leakage, parse_task_sets, task_ref_from_sample
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.tools.cli.main import main

SLIME_EVAL_DATASET_KEYS = frozenset(
    # the fields of slime's EvalDatasetConfig (slime/utils/eval_config.py, THUDM/slime 624b824): the only
    # keys slime's --eval-config loader accepts in a dataset entry (it builds the dataclass from the entry)
    "name path rm_type custom_rm_path input_key label_key tool_key metadata_key multimodal_keys apply_chat_template "
    "apply_chat_template_kwargs n_samples_per_eval_prompt temperature top_p top_k max_response_len stop "
    "stop_token_ids min_new_tokens repetition_penalty skip_special_tokens no_stop_trim custom_generate_function_path "
    "app_service eval_task_timeout min_eval_samples eval_early_stop_remaining eval_early_stop_idle_timeout "
    "message_processor reward_model remote_environment metadata_overrides".split()
)
REPO = Path(__file__).resolve().parents[3]


def prepare(*argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "prepare", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=REPO)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def loaded_tasks(path: Path) -> list[tuple[str, str, str, str]]:
    """Each row of ``path`` read back the way generate() reads a slime sample (config says something else)."""
    config = TauConfig(domain="telecom", split="test")
    refs = [task_ref_from_sample(row["index"], row["metadata"], config) for row in read_rows(path)]
    return [(r.benchmark, r.domain, r.split, r.task_id) for r in refs]


def tau2_tasks(backend, domain: str, split: str) -> list[tuple[str, str, str, str]]:
    return [("tau2", domain, split, task_id) for task_id in backend.tasks(domain, split)]


def test_mixture_rows_load_back_as_their_own_tasks_with_unique_indices(tau2_backend, tmp_path):
    out = tmp_path / "data" / "train.jsonl"
    assert main(["prepare", "--train", "tau2/retail/train", "--train", "tau2/airline/test", "--out", str(out)]) == 0
    expected = tau2_tasks(tau2_backend, "retail", "train") + tau2_tasks(tau2_backend, "airline", "test")
    assert len(expected) == 74 + 20
    assert loaded_tasks(out) == expected
    assert [row["index"] for row in read_rows(out)] == list(range(len(expected)))
    last = task_ref_from_sample(len(expected) - 1, read_rows(out)[-1]["metadata"], TauConfig())
    assert tau2_backend.task(last) == tau2_backend.tasks("airline", "test")[last.task_id]  # from the row's own dump
    assert [p.name for p in out.parent.iterdir()] == ["train.jsonl"]  # no eval YAML without --eval


def test_domain_list_shorthand_writes_the_same_file_as_train_flags(tau2_backend, tmp_path):
    listed, flags, spec = tmp_path / "listed.jsonl", tmp_path / "flags.jsonl", tmp_path / "spec.jsonl"
    assert main(["prepare", "--domain", "retail,airline", "--split", "test", "--out", str(listed)]) == 0
    assert main(["prepare", "--train", "tau2/retail/test", "--train", "tau2/airline/test", "--out", str(flags)]) == 0
    assert main(["prepare", "--train", "tau2/retail,airline/test", "--out", str(spec)]) == 0
    assert listed.read_text() == flags.read_text() == spec.read_text()
    assert len(read_rows(listed)) == 40 + 20


def test_eval_yaml_has_one_slime_dataset_per_eval_set(tau2_backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["prepare", "--out", "data/train.jsonl", "--eval", "tau2/retail,airline/test", "--eval-samples", "4"]
    assert main(argv) == 0
    config = yaml.safe_load((tmp_path / "data" / "train.eval.yaml").read_text())
    assert list(config) == ["eval"] and list(config["eval"]) == ["datasets"]
    datasets = config["eval"]["datasets"]
    assert [d["name"] for d in datasets] == ["tau2_retail_test", "tau2_airline_test"]
    for dataset, domain in zip(datasets, ("retail", "airline"), strict=True):
        assert set(dataset) <= SLIME_EVAL_DATASET_KEYS
        path = Path(dataset["path"])
        assert path.is_absolute() and path == tmp_path / "data" / f"tau2_{domain}_test.jsonl"
        assert loaded_tasks(path) == tau2_tasks(tau2_backend, domain, "test")
        assert (dataset["input_key"], dataset["metadata_key"]) == ("index", "metadata")
        assert dataset["n_samples_per_eval_prompt"] == 4
        module, _, name = dataset["custom_generate_function_path"].rpartition(".")
        assert getattr(importlib.import_module(module), name) is generate
    assert loaded_tasks(tmp_path / "data" / "train.jsonl") == tau2_tasks(tau2_backend, "retail", "train")


def test_leakage_between_any_train_and_eval_set_is_refused_in_one_line(tmp_path):
    out = tmp_path / "train.jsonl"
    result = prepare(
        "--train", "tau2/retail/train", "--train", "tau2/airline/train", "--out", str(out),
        "--eval", "tau1/retail/test", "--eval", "tau2/airline/base",
    )  # fmt: skip
    assert result.returncode == 2 and not list(tmp_path.iterdir())
    assert result.stderr.startswith("slime-tau prepare: error: refusing") and result.stderr.count("\n") == 1
    assert "revised τ-bench v1 retail test tasks" in result.stderr
    assert "tau2/airline/base contains the train split" in result.stderr


def test_overlap_by_task_id_is_refused_and_allow_leakage_writes_it_with_a_warning(tau2_backend, tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    argv = ["prepare", "--domain", "telecom", "--out", str(out), "--eval", "tau2/telecom/full"]
    assert main(argv) == 2 and not out.exists()
    assert "tau2/telecom/train and tau2/telecom/full share 74 tasks" in capsys.readouterr().err
    assert main(["prepare", "--out", str(out), "--eval", "tau2/retail/base", "--allow-leakage"]) == 0
    assert "warning: tau2/retail/base contains the train split" in capsys.readouterr().err
    assert len(read_rows(tmp_path / "tau2_retail_base.jsonl")) == 114


def test_training_sets_that_repeat_tasks_are_refused(tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    assert main(["prepare", "--train", "tau2/retail/base", "--train", "tau2/retail/test", "--out", str(out)]) == 2
    assert "the training sets repeat tasks: tau2/retail/base contains the test split" in capsys.readouterr().err
    assert main(["prepare", "--domain", "retail,retail", "--out", str(out)]) == 2
    assert "training set tau2/retail/train is given more than once" in capsys.readouterr().err
    assert not out.exists()


def test_an_existing_output_is_kept_unless_force(tau2_backend, tmp_path):
    out = tmp_path / "train.jsonl"
    out.write_text("mine\n")
    result = prepare("--out", str(out))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"{out} already exists; pass --force" in result.stderr and out.read_text() == "mine\n"
    assert main(["prepare", "--out", str(out), "--force"]) == 0
    assert len(read_rows(out)) == 74


def _baseline_run(run_dir: Path, outcomes: dict[str, list[str]], split: str = "test") -> None:
    """A ``slime-tau rollout`` run directory: one ``samples.jsonl`` row per episode (task id -> episode outcomes:
    ``pass``, ``fail``, or ``failed`` for an episode that FAILED on an endpoint), the fields ``rollout`` writes."""
    rows = []
    for task_id, episodes in outcomes.items():
        for trial, outcome in enumerate(episodes):
            meta = {"benchmark": "tau2", "domain": "retail", "split": split, "task_id": task_id, "trial": trial}
            meta["termination_reason"] = "user_error" if outcome == "failed" else "user_stop"
            status = "failed" if outcome == "failed" else "completed"
            rows.append({"metadata": meta, "reward": float(outcome == "pass"), "status": status})
    run_dir.mkdir(parents=True)
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def test_keep_pass_rate_keeps_the_tasks_a_baseline_run_solved_sometimes(tau2_backend, tmp_path, capsys):
    ids = list(tau2_backend.tasks("retail", "test"))
    easy, mixed, hard, easy_but_failed = ids[:4]
    run = tmp_path / "runs" / "base"
    outcomes = {easy: ["pass", "pass"], mixed: ["pass", "fail"], hard: ["fail", "fail"]}
    _baseline_run(run, {**outcomes, easy_but_failed: ["pass", "failed"]})  # a FAILED episode is no evidence
    out = tmp_path / "train.jsonl"
    argv = ["prepare", "--split", "test", "--out", str(out), "--keep-pass-rate", f"{run}:0.1-0.9"]
    assert main(argv) == 0
    assert loaded_tasks(out) == [("tau2", "retail", "test", mixed)]
    said = capsys.readouterr().out
    assert f"tau2/retail/test: kept 1 of {len(ids)} tasks with a pass rate in [0.1, 0.9] in {run}" in said
    assert f"dropped 2 above, 1 below, {len(ids) - 4} not in the run" in said

    narrow = tmp_path / "narrow.jsonl"  # a range no task falls in: nothing to train on is refused, no file written
    assert main([*argv[:4], str(narrow), argv[5], f"{run}:0.6-0.9"]) == 2
    assert "no task of tau2/retail/test is left (kept 0 of" in capsys.readouterr().err and not narrow.exists()

    assert main([*argv[:-1], f"{run}:0-1", "--force"]) == 0  # the whole range: every task the run played
    assert sorted(t[3] for t in loaded_tasks(out)) == sorted([easy, mixed, hard, easy_but_failed])


def test_keep_pass_rate_refuses_a_run_of_another_set_or_a_malformed_range_in_one_line(tmp_path, capsys):
    run = tmp_path / "base"
    _baseline_run(run, {"0": ["pass"]}, split="train")
    out = tmp_path / "train.jsonl"
    assert main(["prepare", "--split", "test", "--out", str(out), "--keep-pass-rate", f"{run}:0.1-0.9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run} has no episode of tau2/retail/test (it played tau2/retail/train)" in err
    for spec in (f"{run}:0.9-0.1", f"{run}", "0.1-0.9", f"{run}:a-b"):
        assert main(["prepare", "--out", str(out), "--keep-pass-rate", spec]) == 2
        assert "expected RUN_DIR:LOW-HIGH with 0 <= LOW <= HIGH <= 1" in capsys.readouterr().err
    assert main(["prepare", "--out", str(out), "--keep-pass-rate", f"{tmp_path / 'nowhere'}:0-1"]) == 2
    assert "does not exist" in capsys.readouterr().err and not out.exists()


BAD_INPUTS = {
    "out is a directory": (["--out", "{tmp}"], "is a directory", False),
    "out ends with a slash": (["--out", "{tmp}/new/"], "names a directory", False),
    "out under a file": (["--out", "{tmp}/file/train.jsonl"], "file is a file, not a directory", True),
    "unknown benchmark": (["--benchmark", "tau3", "--out", "{tmp}/t.jsonl"], "expected one of tau1, tau2", False),
    "unknown domain": (["--domain", "retial", "--out", "{tmp}/t.jsonl"], "expected one of airline, retail", False),
    "unknown split": (["--split", "dev", "--out", "{tmp}/t.jsonl"], "expected one of train, test, base", True),
    "malformed train set": (["--train", "tau2/retail", "--out", "{tmp}/t.jsonl"], "is malformed", False),
    "malformed eval set": (["--eval", "tau2/retail,/test", "--out", "{tmp}/t.jsonl"], "is malformed", False),
    "train with shorthand": (
        ["--train", "tau2/retail/train", "--domain", "airline", "--out", "{tmp}/t.jsonl"],
        "cannot be combined with --train",
        False,
    ),
    "zero eval samples": (["--eval-samples", "0", "--out", "{tmp}/t.jsonl"], "expected an integer >= 1", False),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    argv, message, needs_tau2 = BAD_INPUTS[case]
    if needs_tau2:
        pytest.importorskip("tau2")
    (tmp_path / "file").write_text("")
    result = prepare(*(a.format(tmp=tmp_path) for a in argv))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("slime-tau prepare: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["file"]  # nothing written, no temporary left


def test_task_set_specs_parse_and_name_what_is_wrong():
    assert parse_task_sets(" tau2/retail , airline/test") == [
        TaskSet("tau2", "retail", "test"),
        TaskSet("tau2", "airline", "test"),
    ]
    assert TaskSet("tau1", "retail", "train").slug == "tau1_retail_train"
    with pytest.raises(ConfigError, match="task set 'tau1/telecom/test': domain"):
        parse_task_sets("tau1/telecom/test")


def test_leakage_rules():
    assert leakage(TaskSet("tau1", "retail", "train"), TaskSet("tau2", "retail", "test")) is None
    assert leakage(TaskSet("tau2", "airline", "test"), TaskSet("tau1", "airline", "test")) is not None
    assert leakage(TaskSet("tau2", "retail", "train"), TaskSet("tau2", "retail", "test")) is None
    assert leakage(TaskSet("tau2", "telecom", "train"), TaskSet("tau2", "telecom", "train")) is not None
    assert leakage(TaskSet("tau2", "retail", "train"), TaskSet("tau2", "airline", "train")) is None
    assert leakage(TaskSet("tau2", "retail", "base"), TaskSet("tau2", "retail", "test")) is not None


def test_a_domain_without_train_writes_its_only_split(tau2_backend, tmp_path):
    """Walk-through row (g): ``--domain mock`` failed on the default split instead of taking mock's one split."""
    out = tmp_path / "mock.jsonl"
    assert main(["prepare", "--domain", "mock", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and {row["metadata"]["split"] for row in rows} == {"base"}
