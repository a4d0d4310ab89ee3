"""A real model in the loop: ``rollout`` against ``serve --model``, then ``verify`` the stored log-probs.

The tiny random model writes text (no tool calls), the chat user server answers it twice, so each τ² retail
episode lasts three model turns whose tokens, mask and log-probs ``verify`` checks against teacher forcing.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from slime_tau_plugin.tools.cli.main import main  # noqa: E402
from slime_tau_plugin.tools.cli.play.verify_run import verify_run  # noqa: E402
from slime_tau_plugin.tools.model.decoder import ModelDecoder  # noqa: E402
from slime_tau_plugin.tools.model.server import ModelServer  # noqa: E402
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer  # noqa: E402

pytest.importorskip("tau2")


@pytest.fixture(scope="module")
def model_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two τ² retail tasks rolled out by the tiny model (temperature 0.8, seeded)."""
    server = ModelServer(ModelDecoder(str(tiny_model), "cpu"))
    server.start()
    user = ChatUserServer(max_replies=2).start()
    out = tmp_path_factory.mktemp("run") / "run"
    try:
        flags = ["--sglang-url", server.url, "--tokenizer", str(tiny_model), "--tasks", "0-1", "--seed", "3"]
        flags += ["--temperature", "0.8", "--max-new-tokens", "40", "--concurrency", "2", "--user", "llm"]
        flags += ["--user-base-url", user.base_url, "--user-model", "scripted-user", "--out", str(out)]
        assert main(["rollout", *flags]) == 0
    finally:
        user.stop()
        server.stop()
    return out


def test_every_stored_log_prob_matches_teacher_forcing_over_several_turns(model_run, tiny_model):
    report = verify_run(str(model_run), str(tiny_model), tolerance=1e-4)
    assert report.temperature == 0.8
    assert report.is_ok, report
    totals = report.totals()
    assert totals["samples"] == 2 and totals["max_abs"] <= 1e-4
    assert totals["missing_log_probs"] == 0 and totals["mask_errors"] == 0
    assert all(s.turns > 1 and s.trainable > 0 for s in report.samples), report.samples
    if "qwen2_5" in tiny_model.name:  # exact template: the stored ids decode to the rendering of the messages
        assert all(s.text_drift is None for s in report.samples)


def test_small_blocks_verify_the_same_run(model_run, tiny_model):
    """Teacher forcing in 64-token blocks over the KV cache matches what the server sampled token by token."""
    whole = verify_run(str(model_run), str(tiny_model), tolerance=1e-4)
    blocked = verify_run(str(model_run), str(tiny_model), tolerance=1e-4, block_tokens=64)
    assert blocked.is_ok, blocked
    for a, b in zip(whole.samples, blocked.samples, strict=True):
        assert (a.trainable, a.turns) == (b.trainable, b.turns)
        assert abs(a.max_abs - b.max_abs) < 1e-5


def test_verify_names_each_corrupted_sample(model_run, tiny_model, tmp_path, capsys):
    rows = [json.loads(line) for line in (model_run / "samples.jsonl").read_text().splitlines()]
    shifted, edited, nudged, intact, bare = (json.loads(json.dumps(r)) for r in (*rows, *rows, rows[0]))
    del bare["rollout_log_probs"]
    shifted["loss_mask"] = [0, *shifted["loss_mask"][:-1]]
    mask = edited["loss_mask"]
    first = next(i for i in range(len(mask) - 1) if mask[i] and mask[i + 1])  # a model token, not an end of turn
    at = len(edited["tokens"]) - edited["response_length"] + first
    edited["tokens"][at] = (edited["tokens"][at] + 1) % 100_000
    nudged["rollout_log_probs"][nudged["loss_mask"].index(1)] += 0.1
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.json").write_text((model_run / "summary.json").read_text())
    (bad / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (shifted, edited, nudged, intact, bare)))
    assert main(["verify", str(bad), "--model", str(tiny_model), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [s["ok"] for s in report["samples"]] == [False, False, False, True, False]
    assert report["samples"][4]["missing_log_probs"] == report["samples"][4]["trainable"] > 0
    assert report["samples"][0]["mask_errors"] and report["samples"][0]["first_turn_over"] == 1
    assert report["samples"][1]["max_abs"] > 1e-3 and not report["samples"][1]["mask_errors"]
    assert report["samples"][1]["text_drift"] is not None and report["samples"][1]["text_drift"] >= first
    assert abs(report["samples"][2]["max_abs"] - 0.1) < 1e-4 and report["samples"][2]["first_turn_over"] == 1
    assert main(["verify", str(bad), "--model", str(tiny_model)]) == 1
    table = capsys.readouterr().out
    assert "does not follow the generation prompt" in table and "|Δ| 0.1 > 0.0001 from turn 1" in table


def test_verify_bad_input_is_one_line_and_exit_2(tiny_model, tmp_path, capsys):
    assert main(["verify", str(tmp_path / "missing"), "--model", str(tiny_model)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not exist" in err


def test_verify_reads_a_slime_rollout_dump_with_the_temperature_given(model_run, tiny_model, tmp_path, capsys):
    rows = [json.loads(line) for line in (model_run / "samples.jsonl").read_text().splitlines()]
    dump = tmp_path / "0.pt"  # a plain pickle of slime's dump dict reads like torch.save's zip
    dump.write_bytes(pickle.dumps({"rollout_id": 0, "samples": rows}))
    assert main(["verify", str(dump), "--model", str(tiny_model)]) == 2
    assert "--temperature" in capsys.readouterr().err
    assert main(["verify", str(dump), "--model", str(tiny_model), "--temperature", "0.8"]) == 0
    assert "2/2 samples ok" in capsys.readouterr().out


def test_verify_refuses_a_run_rolled_out_with_another_tokenizer(model_run, tiny_model, tmp_path):
    """Walk-through row (b): the run's tokenizer (summary.json) is not the model's; ``verify`` said ``ok``."""
    from slime_tau_plugin.engine.errors import ConfigError
    from tests.tools.model.conftest import qwen3_tokenizer_dir, qwen25_tokenizer_dir

    other = qwen3_tokenizer_dir() if "qwen2_5" in tiny_model.name else qwen25_tokenizer_dir()
    run = tmp_path / "run"
    shutil.copytree(model_run, run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "tokenizer": str(other)}))
    with pytest.raises(ConfigError, match="was rolled out with the tokenizer") as refused:
        verify_run(str(run), str(tiny_model), tolerance=1e-4)
    assert str(other) in str(refused.value) and f"--model {tiny_model}'s" in str(refused.value)
