"""Trajectory bookkeeping and TokenBudget arithmetic (docs/ARCHITECTURE.md, Invariants: TITO and masks)."""

from __future__ import annotations

import itertools

import pytest

from slime_tau_plugin.engine.episode.trajectory import TokenBudget, Trajectory


def _episode() -> Trajectory:
    """Prompt of 3 ids, model turn of 2, continuation of 3, model turn of 1."""
    traj = Trajectory([1, 2, 3])
    traj.add_model_turn([10, 11], [-0.5, -1.5], {"weight_version": "7"})
    traj.add_continuation([20, 21, 22])
    traj.add_model_turn([12], [-0.25])
    return traj


# --- Trajectory ---------------------------------------------------------------------------------------------


def test_empty_prompt_is_rejected() -> None:
    with pytest.raises(ValueError, match="non-empty prompt"):
        Trajectory([])


def test_model_turn_with_mismatched_log_probs_quotes_both_lengths() -> None:
    traj = Trajectory([1])
    with pytest.raises(ValueError, match=r"3 ids but 2 log-probs"):
        traj.add_model_turn([4, 5, 6], [-0.1, -0.2])
    assert traj.response_length == 0
    assert traj.segments == []


def test_ids_are_prompt_followed_by_every_response_id_in_order() -> None:
    traj = _episode()
    assert traj.ids == [1, 2, 3, 10, 11, 20, 21, 22, 12]
    assert traj.response_ids == [10, 11, 20, 21, 22, 12]
    assert traj.ids == [*traj.prompt_ids, *traj.response_ids]
    assert len(traj) == 9
    assert traj.response_length == 6


def test_loss_mask_is_one_only_on_model_sampled_ids() -> None:
    assert _episode().loss_mask == [1, 1, 0, 0, 0, 1]


def test_continuation_log_probs_are_zero_and_model_log_probs_are_kept() -> None:
    assert _episode().rollout_log_probs == [-0.5, -1.5, 0.0, 0.0, 0.0, -0.25]


def test_mask_log_probs_and_response_length_agree() -> None:
    traj = _episode()
    assert len(traj.loss_mask) == len(traj.rollout_log_probs) == traj.response_length == len(traj.response_ids)
    assert traj.ids[-traj.response_length :] == traj.response_ids


def test_model_turn_keeps_meta_info_and_continuation_has_none() -> None:
    traj = _episode()
    assert traj.segments[0].meta_info == {"weight_version": "7"}
    assert traj.segments[1].meta_info is None
    assert [seg.is_trainable for seg in traj.segments] == [True, False, True]


def test_empty_appends_add_no_segment() -> None:
    traj = Trajectory([1, 2])
    traj.add_model_turn([], [])
    traj.add_continuation([])
    assert traj.segments == []
    assert traj.ids == [1, 2]
    assert traj.ids[-1] == 2


def test_the_newest_response_id_ends_ids() -> None:
    assert _episode().ids[-1] == 12


def test_num_trainable_counts_only_model_ids() -> None:
    assert _episode().num_trainable == 3


def test_repr_reports_prompt_response_trainable_and_segment_counts() -> None:
    assert repr(_episode()) == "Trajectory(prompt=3, response=6, trainable=3, segments=3)"


# --- TokenBudget --------------------------------------------------------------------------------------------


def _traj(prompt_len: int, response_len: int = 0) -> Trajectory:
    traj = Trajectory(list(range(prompt_len)))
    if response_len:
        traj.add_continuation([7] * response_len)
    return traj


def test_max_new_tokens_is_clamped_by_context() -> None:
    assert TokenBudget(max_context_len=100).max_new_tokens(_traj(30, 20)) == 50


def test_max_new_tokens_is_clamped_by_total_response_budget() -> None:
    budget = TokenBudget(max_context_len=100, max_response_len=25)
    assert budget.max_new_tokens(_traj(30, 20)) == 5


def test_max_new_tokens_is_clamped_by_per_turn_cap() -> None:
    budget = TokenBudget(max_context_len=100, max_response_len=60, max_tokens_per_turn=8)
    assert budget.max_new_tokens(_traj(30, 20)) == 8


def test_max_new_tokens_is_not_positive_once_the_context_is_full() -> None:
    assert TokenBudget(max_context_len=10).max_new_tokens(_traj(6, 4)) == 0
    assert TokenBudget(max_context_len=10, max_response_len=4).max_new_tokens(_traj(2, 4)) == 0


def test_fits_at_the_context_boundary() -> None:
    budget = TokenBudget(max_context_len=20)
    traj = _traj(10, 2)
    assert budget.fits(traj, 7)  # 12 + 7 + one generated id == 20
    assert not budget.fits(traj, 8)


def test_fits_at_the_response_boundary() -> None:
    budget = TokenBudget(max_context_len=1000, max_response_len=10)
    traj = _traj(10, 2)
    assert budget.fits(traj, 7)  # 2 + 7 + one generated id == 10
    assert not budget.fits(traj, 8)


def test_fits_ignores_the_per_turn_cap() -> None:
    assert TokenBudget(max_context_len=1000, max_tokens_per_turn=1).fits(_traj(10), 500)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_context_len": 1}, "max_context_len"),
        ({"max_context_len": 10, "max_response_len": 0}, "max_response_len"),
        ({"max_context_len": 10, "max_tokens_per_turn": -3}, "max_tokens_per_turn"),
    ],
)
def test_budget_rejects_limits_that_cannot_work(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TokenBudget(**kwargs)


def test_clamp_never_lets_prompt_plus_response_exceed_any_limit() -> None:
    """Property-style: over many sizes, generating ``max_new_tokens`` ids stays within every limit, tightly."""
    context = 64
    for prompt_len, response_len, max_response, per_turn in itertools.product(
        (1, 2, 17, 40, 63, 64), (0, 1, 5, 23, 30), (None, 1, 10, 30, 64), (None, 1, 7, 100)
    ):
        if prompt_len + response_len > context:
            continue
        budget = TokenBudget(context, max_response, per_turn)
        traj = _traj(prompt_len, response_len)
        n = budget.max_new_tokens(traj)
        case = (prompt_len, response_len, max_response, per_turn, n)
        if n < 1:
            full = len(traj) >= context or (max_response is not None and response_len >= max_response)
            assert full, case
            continue
        traj.add_model_turn([9] * n, [0.0] * n)
        assert len(traj) <= context, case
        assert max_response is None or traj.response_length <= max_response, case
        assert per_turn is None or n <= per_turn, case
        hit = len(traj) == context or traj.response_length == max_response or n == per_turn
        assert hit, case  # the clamp is tight: some limit is reached exactly


def test_without_training_keeps_ids_and_drops_every_trainable_token():
    traj = Trajectory((1, 2))
    traj.add_model_turn([3, 4], [-0.1, -0.2], {"id": "r"})
    traj.add_continuation([5])
    frozen = traj.without_training()
    assert frozen.ids == traj.ids and frozen.response_length == 3
    assert frozen.loss_mask == [0, 0, 0] and frozen.rollout_log_probs == [0.0, 0.0, 0.0]
    assert traj.loss_mask == [1, 1, 0]  # the original is untouched


def test_held_ids_are_a_copy_kept_in_step_with_the_segments() -> None:
    traj = _episode()
    sent = traj.ids
    sent.append(99)  # what a request does with its input_ids must not change what is held
    assert traj.ids == [1, 2, 3, 10, 11, 20, 21, 22, 12] == [*traj.prompt_ids, *traj.response_ids]
    rebuilt = Trajectory(traj.prompt_ids, list(traj.segments), traj.response_length)
    assert rebuilt.ids == traj.ids and traj.without_training().ids == traj.ids
