"""``verify``'s pure checks (``model/checks.py``): turns, mask errors and log-prob gaps on made-up ids."""

from __future__ import annotations

from slime_tau_plugin.tools.model.checks import TemplateMarks, compare_sample, mask_errors, trainable_runs

EOT, GP = 99, (50, 51)  # end-of-turn id; generation prompt ids (<|im_start|>assistant\n)
MARKS = TemplateMarks(EOT, GP)
PROMPT = [1, 2, *GP]
# turn 1: 7 8 EOT | tool glue 60 61 + generation prompt | turn 2: 9 EOT
RESPONSE = [7, 8, EOT, 60, 61, *GP, 9, EOT]
MASK = [1, 1, 1, 0, 0, 0, 0, 1, 1]


def test_a_clean_sample_has_two_turns_and_no_mask_error():
    assert trainable_runs(MASK) == [(0, 3), (7, 9)]
    assert mask_errors(RESPONSE, PROMPT, MASK, MARKS, "user_stop") == []


def test_a_mask_shifted_by_one_either_way_is_a_mask_error():
    late = [0, *MASK[:-1]]
    early = [*MASK[1:], 0]
    assert any("does not follow the generation prompt" in e for e in mask_errors(RESPONSE, PROMPT, late, MARKS, ""))
    assert any("without the end-of-turn id" in e for e in mask_errors(RESPONSE, PROMPT, early, MARKS, ""))


def test_a_mask_covering_a_tool_message_is_named():
    merged = [1] * len(MASK)
    errors = mask_errors(RESPONSE, PROMPT, merged, MARKS, "user_stop")
    assert "turn 1 holds the end-of-turn id at response position 2, before its end" in errors


def test_a_turn_cut_by_length_may_end_without_the_end_of_turn_id():
    cut, cut_mask = RESPONSE[:-1], MASK[:-1]
    assert mask_errors(cut, PROMPT, cut_mask, MARKS, "length") == []
    assert mask_errors(cut, PROMPT, cut_mask, MARKS, "user_stop") != []


def test_a_longer_generation_prompt_from_template_kwargs_is_followed():
    thinking_off = (*GP, 70, 71)  # e.g. Qwen3's enable_thinking=False: <think>\n\n</think>\n\n after the header
    prompt = [1, 2, *thinking_off]
    response = [7, EOT, 60, *thinking_off, 9, EOT]
    assert mask_errors(response, prompt, [1, 1, 0, 0, 0, 0, 0, 1, 1], MARKS, "user_stop") == []


def test_gaps_missing_log_probs_and_the_first_turn_over_tolerance():
    rollout = [-1.0, -2.0, -0.5, 0, 0, 0, 0, -3.0, float("nan")]
    teacher = [-1.0, -2.0, -0.5, -3.2, -1.0]  # one per trainable position; the last has no stored log-prob
    check = compare_sample(
        index=4, task="7", trial=0, mask=MASK, rollout=rollout, teacher=teacher, tolerance=1e-4, errors=[]
    )
    assert (check.turns, check.trainable, check.compared, check.missing_log_probs) == (2, 5, 4, 1)
    assert check.first_turn_over == 2 and abs(check.max_abs - 0.2) < 1e-9 and not check.is_ok()
