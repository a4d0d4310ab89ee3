"""The parity check every trainer's leg uses (``tests/parity.py``) names the first difference, and only a real one."""

from __future__ import annotations

import pytest

from tests.parity import PARITY_CASES, ParityRecord, assert_same, first_difference

BASE = ParityRecord.of([1, 2, 3], [4, 5, 6], [1, 1, 0], [-0.5, -0.25, 0.0], 1.0, "completed")


def changed(**fields) -> ParityRecord:
    values = {"prompt": [1, 2, 3], "response": [4, 5, 6], "mask": [1, 1, 0], "logprobs": [-0.5, -0.25, 0.0]}
    values.update(fields)
    reward = values.pop("reward", 1.0)
    status = values.pop("status", "completed")
    return ParityRecord.of(values["prompt"], values["response"], values["mask"], values["logprobs"], reward, status)


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (changed(prompt=[1, 9, 3]), "tokens differ at prompt position 1: 2 != 9"),
        (changed(response=[4, 5, 7]), "tokens differ at response position 2: 6 != 7"),
        (changed(mask=[1, 1, 1]), "loss_mask differ at response position 2: 0 != 1"),
        (changed(logprobs=[-0.5, -0.26, 0.0]), "logprobs differ at response position 1"),
        (changed(reward=None), "reward 1.0 != None"),
        (changed(status="truncated"), "status 'completed' != 'truncated'"),
        (changed(prompt=[1, 2], response=[3, 4, 5, 6], mask=[0, 1, 1, 0], logprobs=[0.0, -0.5, -0.25, 0.0]),
         "prompt length 3 != 2"),
    ],
)  # fmt: skip
def test_the_first_difference_is_named(other, message):
    assert message in (first_difference(BASE, other) or "")
    with pytest.raises(AssertionError, match="verl vs slime on retail-short"):
        assert_same(BASE, other, "verl", PARITY_CASES[0])


def test_float32_rounding_of_a_logprob_is_the_same_episode():
    import struct

    rounded = [struct.unpack("f", struct.pack("f", x))[0] for x in (-0.1, -0.3, 0.0)]
    a = ParityRecord.of([1], [2, 3, 4], [1, 1, 0], [-0.1, -0.3, 0.0], 0.0, "truncated")
    assert first_difference(a, ParityRecord.of([1], [2, 3, 4], [1, 1, 0], rounded, 0.0, "truncated")) is None
