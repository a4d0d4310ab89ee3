"""``make-tiny-model``: deterministic weights, the tokenizer's files and a calibrated end of turn."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from slime_tau_plugin.engine.chat.templates import ChatTemplate, load_tokenizer  # noqa: E402
from slime_tau_plugin.tools.cli.main import main  # noqa: E402
from slime_tau_plugin.tools.model.tiny import MANIFEST  # noqa: E402
from tests.tools.model.conftest import qwen25_tokenizer_dir  # noqa: E402


def _digest(path: Path) -> str:
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_same_seed_gives_identical_weights_and_the_turn_ends_with_the_templates_id(tiny_qwen25, tmp_path, capsys):
    again = tmp_path / "again"
    flags = ["--tokenizer", str(qwen25_tokenizer_dir()), "--out", str(again), "--seed", "0", "--mean-turn-tokens", "12"]
    assert main(["make-tiny-model", *flags]) == 0
    assert "end of turn '<|im_end|>'" in capsys.readouterr().out
    assert _digest(again) == _digest(tiny_qwen25)
    built = json.loads((again / MANIFEST).read_text())["built"]
    tokenizer = load_tokenizer(str(again))
    assert built["eot_id"] == ChatTemplate(tokenizer).eot_ids[0] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert built["vocab_size"] == len(tokenizer)
    assert abs(built["eot_probability"] - 1 / 12) < 0.02
    config = json.loads((again / "config.json").read_text())
    assert config["eos_token_id"] == built["eot_id"] and config["vocab_size"] == len(tokenizer)
    assert (again / "tokenizer.json").read_bytes() == (qwen25_tokenizer_dir() / "tokenizer.json").read_bytes()


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["make-tiny-model", "--tokenizer", str(tmp_path / "none"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"tokenizer directory '{tmp_path / 'none'}': no such directory" in err
