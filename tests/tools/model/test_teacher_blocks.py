"""``verify`` teacher-forces in blocks over the KV cache: the same log-probs, attention never wider than a block.

Memory is linear in the sample because no layer ever sees more than ``block`` queries at once (the attention
scores are ``heads x block x keys``); benchmarks/verify_memory.md measures the peaks on CPU and on an H200.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("torch")

from slime_tau_plugin.tools.cli.main import main  # noqa: E402
from slime_tau_plugin.tools.model import load_causal_lm  # noqa: E402
from slime_tau_plugin.tools.model.teacher import BLOCK, teacher_log_probs  # noqa: E402


@pytest.fixture(scope="module")
def model(tiny_qwen25: Path):
    return load_causal_lm(str(tiny_qwen25), "cpu")[0]


def _sample(length: int, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    tokens = [rng.randrange(1000, 100_000) for _ in range(length)]
    positions = [1, 2] + [p for p in range(40, length) if (p // 50) % 2 == 0]  # runs that straddle block edges
    return tokens, positions


def _max_queries(model, run) -> int:
    """The widest query block any attention layer saw while ``run()`` ran."""
    seen = [0]
    hooks = [
        layer.self_attn.register_forward_hook(
            lambda _m, _args, kwargs, _out: seen.__setitem__(0, max(seen[0], kwargs["hidden_states"].shape[1])),
            with_kwargs=True,
        )
        for layer in model.model.layers
    ]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return seen[0]


def test_blocks_give_the_one_pass_log_probs_and_never_attend_wider_than_a_block(model):
    tokens, positions = _sample(700)
    one_pass = teacher_log_probs(model, "cpu", tokens, positions, 0.8, block=len(tokens))
    out: list[float] = []
    widest = _max_queries(model, lambda: out.extend(teacher_log_probs(model, "cpu", tokens, positions, 0.8, block=96)))
    assert widest == 96
    assert len(out) == len(one_pass) == len(positions)
    assert max(abs(a - b) for a, b in zip(one_pass, out, strict=True)) < 1e-5
    assert _max_queries(model, lambda: teacher_log_probs(model, "cpu", tokens, positions, 0.8)) == len(tokens)


def test_a_sample_within_one_block_is_computed_as_before(model):
    """Today's numbers on short samples: one block is the one-pass computation, bit for bit."""
    tokens, positions = _sample(300, seed=1)
    assert len(tokens) <= BLOCK
    before = teacher_log_probs(model, "cpu", tokens, positions, 1.0, block=len(tokens))
    assert teacher_log_probs(model, "cpu", tokens, positions, 1.0) == before


def test_positions_past_the_last_trained_token_are_not_computed(model):
    tokens, _ = _sample(500, seed=2)
    positions = [3, 130, 131, 260]
    widest = _max_queries(model, lambda: teacher_log_probs(model, "cpu", tokens, positions, 1.0, block=128))
    assert widest == 128
    full = teacher_log_probs(model, "cpu", tokens, positions, 1.0, block=len(tokens))
    blocked = teacher_log_probs(model, "cpu", tokens, positions, 1.0, block=128)
    assert max(abs(a - b) for a, b in zip(full, blocked, strict=True)) < 1e-5


def test_a_block_below_one_is_refused(model):
    with pytest.raises(ValueError, match="block=0"):
        teacher_log_probs(model, "cpu", [1, 2, 3], [1, 2], 1.0, block=0)


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_verify_refuses_a_bad_block_size_in_one_line(value, tiny_qwen25, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["verify", str(tmp_path), "--model", str(tiny_qwen25), "--block-tokens", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--block-tokens" in err[-1] and "Traceback" not in "".join(err)
