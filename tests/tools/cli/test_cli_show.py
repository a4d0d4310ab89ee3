"""``slime-tau show`` as a user runs it: a subprocess on a run written by ``slime-tau rollout`` itself.

Damaged runs (cut-off last line, a row without metadata, no summary, a relative tokenizer path) are made by
editing copies of a real run. Every bad input must end in one stderr line naming the file and the fix.
"""

from __future__ import annotations

import html
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from slime_tau_plugin.tools.cli.main import build_parser
from slime_tau_plugin.tools.cli.views.show_html import token_pieces

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "slime_tau_plugin.tools.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd or ROOT, env=ENV, timeout=300)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (transformers' own import notice aside)."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("[transformers]")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tau2_backend, qwen3_dir, tmp_path_factory) -> Path:
    """3 tasks x 2 trials played by the built-in oracle, written by the CLI into a fresh directory."""
    out = tmp_path_factory.mktemp("show") / "run"
    proc = cli("rollout", "--tasks", "0-2", "--samples-per-task", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def copy(run_dir, tmp_path):
    """A writable copy of the run, to damage."""

    def make(name: str = "copy") -> Path:
        return Path(shutil.copytree(run_dir, tmp_path / name, symlinks=True))

    return make


def rows_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def write_rows(run: Path, rows: list[dict]) -> None:
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_missing_run_dir_and_missing_samples_are_one_line(tmp_path):
    assert "does not exist" in one_error_line(cli("show", str(tmp_path / "nope")))
    line = one_error_line(cli("show", str(tmp_path)))
    assert f"{tmp_path} has no samples.jsonl" in line and "--out directory" in line
    (tmp_path / "samples.jsonl").write_text("")
    line = one_error_line(cli("show", str(tmp_path)))
    assert f"{tmp_path / 'samples.jsonl'} has no samples" in line


def test_sample_out_of_range_says_how_many_there_are(run_dir):
    line = one_error_line(cli("show", str(run_dir), "--sample", "6"))
    assert f"--sample 6 is out of range: {run_dir / 'samples.jsonl'} has 6 samples (--sample 0-5)" in line
    assert "out of range" in one_error_line(cli("show", str(run_dir), "--sample", "-1"))


def test_cut_off_last_line_shows_complete_rows_and_refuses_the_broken_one(copy):
    run = copy()
    rows = rows_of(run)  # in the order episodes finished
    shown, broken = rows[4]["metadata"], rows[5]["metadata"]
    data = (run / "samples.jsonl").read_bytes()
    last_start = data.rstrip(b"\n").rindex(b"\n") + 1
    (run / "samples.jsonl").write_bytes(data[: last_start + (len(data) - last_start) // 2])  # a killed write
    proc = cli("show", str(run), "--sample", "4")
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: {run / 'samples.jsonl'} line 6 is cut off (the run was interrupted while writing it); "
        "showing the 5 complete samples (0-4)"
    ]
    assert f"task {shown['task_id']} trial {shown['trial']}" in proc.stdout.splitlines()[0]
    line = one_error_line(cli("show", str(run), "--sample", "5"))
    assert "sample 5" in line and "line 6" in line and "--sample (0-4)" in line
    missing = cli("show", str(run), "--task", broken["task_id"], "--trial", str(broken["trial"]))
    assert f"task {broken['task_id']} has no trial {broken['trial']}" in one_error_line(missing)


def test_a_row_without_metadata_is_named_and_the_others_still_show(copy):
    run = copy()
    rows = rows_of(run)
    del rows[1]["metadata"]
    write_rows(run, rows)
    line = one_error_line(cli("show", str(run), "--sample", "1"))
    assert f"{run / 'samples.jsonl'} line 2" in line and "no 'metadata'" in line
    assert cli("show", str(run), "--sample", "0").returncode == 0


def test_tokenizer_is_needed_and_named_when_the_summary_lacks_it(copy, qwen3_dir):
    run = copy()
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({k: v for k, v in summary.items() if k != "tokenizer"}))
    line = one_error_line(cli("show", str(run)))
    assert f"{run / 'summary.json'} records no tokenizer; pass --tokenizer DIR" in line
    assert cli("show", str(run), "--tokenizer", qwen3_dir).returncode == 0
    (run / "summary.json").write_text("{oops")
    assert "summary.json (Expecting" in one_error_line(cli("show", str(run)))
    (run / "summary.json").unlink()
    line = one_error_line(cli("show", str(run)))
    assert "summary.json does not exist" in line and "--tokenizer" in line
    assert "--tokenizer /no/such: no such directory" in one_error_line(cli("show", str(run), "--tokenizer", "/no/such"))


@pytest.mark.parametrize("layout", ["relative to where rollout ran", "relative to the run dir", "nowhere"])
def test_show_works_from_any_directory(copy, qwen3_dir, tmp_path, layout):
    project = tmp_path / "project"
    run = Path(shutil.copytree(copy(), project / "runs" / "a"))
    if layout == "relative to where rollout ran":
        (project / "tok").symlink_to(qwen3_dir)
        recorded = "tok"
    elif layout == "relative to the run dir":
        (run / "tokenizer").symlink_to(qwen3_dir)
        recorded = "tokenizer"
    else:
        recorded = "models/missing"
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "tokenizer": recorded}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = cli("show", str(run), cwd=elsewhere)
    if layout == "nowhere":
        line = one_error_line(proc)
        assert "'models/missing' recorded in" in line and "pass --tokenizer DIR" in line
    else:
        assert proc.returncode == 0, proc.stderr
        first = rows_of(run)[0]["metadata"]  # rows are in the order episodes finished
        assert proc.stdout.startswith(
            f"tau2/retail/train task {first['task_id']} trial {first['trial']} | status completed"
        )


def test_task_and_trial_select_by_tau_task_id(run_dir):
    proc = cli("show", str(run_dir), "--task", "1", "--trial", "1")
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in rows_of(run_dir) if r["metadata"]["task_id"] == "1" and r["metadata"]["trial"] == 1)
    assert proc.stdout.startswith("tau2/retail/train task 1 trial 1 |")
    assert f"{sum(row['loss_mask'])} trainable (mask 1)" in proc.stdout
    assert "its tasks: 0, 1, 2" in one_error_line(cli("show", str(run_dir), "--task", "99"))
    assert "its trials: 0, 1" in one_error_line(cli("show", str(run_dir), "--task", "1", "--trial", "5"))
    assert "--trial 1 needs --task" in one_error_line(cli("show", str(run_dir), "--trial", "1"))
    assert "not both" in one_error_line(cli("show", str(run_dir), "--task", "1", "--sample", "0"))


def test_html_page_escapes_and_shows_prompt_breakdown_and_log_probs(copy, qwen3, tmp_path):
    run = copy()
    rows = rows_of(run)
    hostile = "<script>alert('x')</script> & \"quoted\""
    rows[0]["metadata"]["messages"][1]["content"] += hostile
    rows[0]["metadata"]["seed"] = 1234  # a key a newer rollout may add: shown, not refused
    write_rows(run, rows)
    page_path = tmp_path / "t.html"
    proc = cli("show", str(run), "--html", str(page_path))
    assert proc.returncode == 0, proc.stderr
    page = page_path.read_text()
    row, meta = rows[0], rows[0]["metadata"]
    assert "<script" not in page and html.escape(hostile) in page
    assert "<tool_call>" not in page and "&lt;tool_call&gt;" in page
    assert html.escape(meta["messages"][0]["content"][:60]) in page  # the system message
    assert "reward_breakdown.DB" in page and "reward_breakdown.COMMUNICATE" in page
    assert "<td>seed</td><td>1234</td>" in page and "user_stop" in page
    spans = re.findall(r"<span class='tok(?: low)?' title='logprob (-?[\d.]+) · id (\d+)'>(.*?)</span>", page, re.S)
    response = row["tokens"][len(row["tokens"]) - row["response_length"] :]
    trained = [(t, lp) for t, lp, m in zip(response, row["rollout_log_probs"], row["loss_mask"], strict=True) if m]
    assert [int(i) for _, i, _ in spans] == [t for t, _ in trained]
    assert [float(lp) for lp, _, _ in spans] == pytest.approx([lp for _, lp in trained], abs=5e-5)
    turns: list[list[int]] = [[]]
    for t, m in zip(response, row["loss_mask"], strict=True):
        if m:
            turns[-1].append(t)
        elif turns[-1]:
            turns.append([])
    expected = "".join(qwen3.decode(ids, skip_special_tokens=False) for ids in turns)
    assert html.unescape("".join(text for _, _, text in spans)) == expected
    assert page.count('class="model"') == meta["num_turns"]


def test_html_page_of_a_failed_sample_shows_its_error(copy, tmp_path):
    run = copy()
    rows = rows_of(run)
    failed = rows[1]
    failed.update(status="failed", reward=0.0, remove_sample=True, loss_mask=[0] * failed["response_length"])
    failed["metadata"].update(termination_reason="env_error", error="EnvBackendError: step timed out <after 120 s>")
    failed["metadata"].pop("reward_info")
    write_rows(run, rows)
    page_path = tmp_path / "failed.html"
    proc = cli("show", str(run), "--sample", "1", "--html", str(page_path))
    assert proc.returncode == 0, proc.stderr
    page = page_path.read_text()
    assert "<h2>Error</h2><pre>EnvBackendError: step timed out &lt;after 120 s&gt;</pre>" in page
    assert "st-failed'>FAILED<" in page and "<b>env_error</b>" in page and "No breakdown recorded" in page
    assert 'class="model"' not in page and "0 trainable" in page
    assert "error: EnvBackendError: step timed out <after 120 s>" in proc.stdout


def test_token_pieces_keep_multibyte_characters_whole(qwen3):
    ids = qwen3.encode("naïve 🫠 龘 日本語 done")  # 🫠 and 龘 take several ids each

    def decode(x: list[int]) -> str:
        return qwen3.decode(x, skip_special_tokens=False)

    pieces = token_pieces(ids, decode)
    assert len(pieces) == len(ids) and "".join(pieces) == decode(ids)
    assert not any("\ufffd" in p for p in pieces)
    assert " 🫠" in pieces and " 龘" in pieces and pieces.count("") >= 2  # the last id of a character carries it


def test_compare_puts_two_runs_side_by_side(run_dir, copy):
    other = copy("other")
    summary = json.loads((other / "summary.json").read_text())
    summary["domains"]["tau2/retail"].update({"pass^1": 0.5, "pass^2": 0.25, "tasks": 2, "samples": 4})
    summary["domains"]["tau2/airline"] = {"tasks": 1, "samples": 2, "pass^1": 1.0, "pass^2": 1.0, "reward_mean": 1}
    (other / "summary.json").write_text(json.dumps(summary))
    proc = cli("show", str(run_dir), "--compare", str(other))
    assert proc.returncode == 0, proc.stderr
    table = [re.split(r"\s{2,}", ln.strip()) for ln in proc.stdout.splitlines()]
    assert ["tau2/retail", "pass^1", "1.000", "0.500", "-0.500"] in table
    assert ["tau2/retail", "pass^2", "1.000", "0.250", "-0.750"] in table
    assert ["tau2/airline", "pass^1", "—", "1.000", "—"] in table
    assert "note: tau2/airline is only in run B" in proc.stdout and "differ in size" in proc.stdout
    (other / "summary.json").unlink()
    line = one_error_line(cli("show", str(run_dir), "--compare", str(other)))
    assert f"{other / 'summary.json'} does not exist" in line
    (other / "summary.json").write_text(json.dumps({"samples": 0}))
    assert "has no per-domain results" in one_error_line(cli("show", str(run_dir), "--compare", str(other)))
    assert "drop --sample" in one_error_line(cli("show", str(run_dir), "--compare", str(run_dir), "--sample", "0"))


def test_compare_runs_a_paired_test_over_the_shared_tasks(run_dir, copy):
    same = cli("show", str(run_dir), "--compare", str(run_dir))
    assert same.returncode == 0, same.stderr
    assert "paired tau2/retail pass^1: B − A = +0.000" in same.stdout and "within the noise" in same.stdout
    assert "over 3 shared tasks" in same.stdout and "sign-flip permutation" in same.stdout
    worse, better = copy("worse"), copy("better")
    for run, wins in ((worse, 0), (better, 2)):  # 40 tasks, 2 trials each: 0/2 in A, 2/2 in B
        summary = json.loads((run / "summary.json").read_text())
        summary["domains"]["tau2/retail"]["per_task"] = {f"t{i}": [wins, 2] for i in range(40)}
        (run / "summary.json").write_text(json.dumps(summary))
    proc = cli("show", str(worse), "--compare", str(better))
    assert proc.returncode == 0, proc.stderr
    assert "paired tau2/retail pass^1: B − A = +1.000" in proc.stdout and "LARGER than the noise" in proc.stdout
    assert "paired tau2/retail pass^2: B − A = +1.000" in proc.stdout


def test_compare_reads_a_run_written_before_the_summary_keys_were_renamed(run_dir, copy):
    old = copy("old")
    summary = json.loads((old / "summary.json").read_text())
    retail = summary["domains"]["tau2/retail"]
    retail["mean_reward"] = 0.25
    del retail["reward_mean"]
    (old / "summary.json").write_text(json.dumps(summary))
    proc = cli("show", str(old), "--compare", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    table = [re.split(r"\s{2,}", ln.strip()) for ln in proc.stdout.splitlines()]
    assert ["tau2/retail", "reward_mean", "0.250", "1.000", "+0.750"] in table


def test_every_show_option_has_help_that_states_its_default():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for action in sub.choices["show"]._actions:
        if action.dest != "help":
            assert action.help and "default" in action.help, action.dest


# slime's --save-debug-rollout-data dumps: torch.save({"rollout_id": N, "samples": [Sample.to_dict()]}, path)


def save_like_slime(path: Path, rows: list[dict], rollout_id: int) -> None:
    """Write a dump as slime does (torch.save of plain dicts), or, without torch, the same dict pickled.

    Our rows are what generate() wrote into slime's Sample; ``Sample.to_dict`` adds slime's other fields.
    """
    extra = {"group_index": None, "index": None, "label": None, "weight_versions": [], "spec_info": {}}
    dump = {"rollout_id": rollout_id, "samples": [{**extra, **row} for row in rows]}
    try:
        import torch
    except ImportError:
        path.write_bytes(pickle.dumps(dump, protocol=2))
    else:
        torch.save(dump, path)


@pytest.fixture
def no_torch(tmp_path) -> dict:
    """A subprocess environment where ``import torch`` fails, as on a machine without torch."""
    stub = tmp_path / "no_torch" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named torch (blocked by this test)')\n")
    return {**ENV, "PYTHONPATH": f"{stub.parent}{os.pathsep}{ROOT}"}


def body_of(stdout: str) -> str:
    """What ``show`` prints from a sample's headline on (after a dump's summary lines)."""
    return stdout[stdout.index("tau2/retail/train task") :]


def test_a_slime_dump_shows_its_samples_like_a_run(run_dir, qwen3_dir, tmp_path):
    rows = rows_of(run_dir)
    save_like_slime(tmp_path / "3.pt", rows, 3)
    proc = cli("show", str(tmp_path / "3.pt"), "--sample", "1", "--tokenizer", qwen3_dir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{tmp_path / '3.pt'}: rollout 3, 6 samples"
    assert lines[1].startswith("tau2/retail: 6 samples | reward 1.000 | pass 6/6 | partial 1.000 | status completed 6")
    assert "ended by user_stop 6" in lines[1]
    same = cli("show", str(run_dir), "--sample", "1")
    assert body_of(proc.stdout) == same.stdout  # mask blocks, reward, status, ends: as for the run itself
    assert "partial score: 1.0" in proc.stdout
    bare = cli("show", str(tmp_path / "3.pt"), "--task", rows[2]["metadata"]["task_id"], "--trial", "1")
    assert bare.returncode == 0, bare.stderr
    assert "[MODEL, trainable, " in bare.stdout and "pass --tokenizer DIR" in bare.stdout
    assert "<tool_call>" not in bare.stdout  # nothing decoded without a tokenizer


def test_a_directory_of_dumps_lists_every_rollout_and_shows_the_last(run_dir, tmp_path):
    rows = rows_of(run_dir)
    failed = {**rows[0], "status": "failed", "reward": 0.0, "metadata": {**rows[0]["metadata"], "error": "user down"}}
    save_like_slime(tmp_path / "2.pt", rows[:4], 2)
    save_like_slime(tmp_path / "10.pt", [failed, *rows[1:2]], 10)
    save_like_slime(tmp_path / "eval_10.pt", rows, 10)
    proc = cli("show", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    table = [ln.split() for ln in proc.stdout.splitlines()[1:5]]
    assert table == [
        ["rollout", "samples", "reward", "pass", "failed", "partial"],
        ["2", "4", "1.000", "1.000", "0.000", "1.000"],
        ["10", "2", "0.500", "0.500", "0.500", "1.000"],
        ["eval_10", "6", "1.000", "1.000", "0.000", "1.000"],
    ]
    assert f"{tmp_path / '10.pt'}: rollout 10, 2 samples" in proc.stdout
    assert "status failed 1, completed 1" in proc.stdout and "error: user down" in proc.stdout
    proc = cli("show", str(tmp_path), "--rollout", "eval_10", "--sample", "5")
    assert proc.returncode == 0 and "evaluation after rollout 10, 6 samples" in proc.stdout
    assert "its dumps: 2, 10, eval_10" in one_error_line(cli("show", str(tmp_path), "--rollout", "7"))
    assert "out of range" in one_error_line(cli("show", str(tmp_path / "2.pt"), "--sample", "4"))
    assert "a slime dump has none" in one_error_line(cli("show", str(tmp_path), "--compare", str(run_dir)))


def test_torch_save_dumps_read_without_torch_and_tensors_with_it(run_dir, tmp_path, no_torch):
    torch = pytest.importorskip("torch")
    rows = rows_of(run_dir)
    torch.save({"rollout_id": 1, "samples": rows}, tmp_path / "1.pt")
    blocked = subprocess.run(
        [sys.executable, "-m", "slime_tau_plugin.tools.cli", "show", str(tmp_path / "1.pt")],
        capture_output=True, text=True, cwd=ROOT, env=no_torch, timeout=300,
    )  # fmt: skip
    assert blocked.returncode == 0, blocked.stderr
    assert "rollout 1, 6 samples" in blocked.stdout
    routed = [{**row, "rollout_routed_experts": torch.zeros(row["response_length"], 2)} for row in rows]
    torch.save({"rollout_id": 2, "samples": routed}, tmp_path / "2.pt")
    proc = cli("show", str(tmp_path / "2.pt"))
    assert proc.returncode == 0, proc.stderr
    assert "rollout 2, 6 samples" in proc.stdout


class _Tensor:
    """Pickled the way torch pickles a tensor's storage: as a persistent id."""


class _TensorPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", "FloatStorage", "0", "cpu", 4) if isinstance(obj, _Tensor) else None


def test_bad_dumps_are_one_line(run_dir, tmp_path, no_torch):
    rows = rows_of(run_dir)
    assert "does not exist" in one_error_line(cli("show", str(tmp_path / "7.pt")))
    good = tmp_path / "good.pt"
    with zipfile.ZipFile(good, "w") as archive:  # torch.save's layout: <name>/data.pkl and small records
        archive.writestr("good/data.pkl", pickle.dumps({"rollout_id": 1, "samples": rows}, protocol=2))
        archive.writestr("good/version", "3\n")
    assert cli("show", str(good)).returncode == 0
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    assert "damaged torch.save file" in one_error_line(cli("show", str(cut)))
    text = tmp_path / "notes.pt"
    text.write_text("not a dump\n")
    assert "damaged or not a torch.save/pickle file" in one_error_line(cli("show", str(text)))
    other = tmp_path / "other.pt"
    other.write_bytes(pickle.dumps({"model": [1, 2]}))
    assert "not slime's rollout dump" in one_error_line(cli("show", str(other)))
    code = tmp_path / "code.pt"
    code.write_bytes(pickle.dumps({"samples": [Path("x")]}))
    assert "pathlib" in one_error_line(cli("show", str(code)))  # refused, never constructed
    tensors = tmp_path / "tensors.pt"
    buffer = io.BytesIO()
    _TensorPickler(buffer, protocol=2).dump({"rollout_id": 1, "samples": [{**rows[0], "tokens": _Tensor()}]})
    tensors.write_bytes(buffer.getvalue())
    proc = subprocess.run(
        [sys.executable, "-m", "slime_tau_plugin.tools.cli", "show", str(tensors)],
        capture_output=True, text=True, cwd=ROOT, env=no_torch, timeout=300,
    )  # fmt: skip
    assert "needs torch to read: pip install torch==2.13.0" in one_error_line(proc)
