"""The per-task record and the curriculum's rule (``reporting/task_history.py``, ``curriculum_rule.py``): pure."""

from __future__ import annotations

import json

from slime_tau_plugin.reporting.curriculum_rule import CurriculumDraws, CurriculumSettings, task_weight
from slime_tau_plugin.reporting.task_history import RECORD_FILE, TaskRecord, TaskStats, task_outcomes
from tests.contracts.slime_sample import Sample


def _sample(task: int, reward: float, status: str = "COMPLETED", domain: str = "retail") -> Sample:
    meta = {"benchmark": "tau2", "domain": domain, "task_id": str(task), "termination_reason": "agent_stop"}
    return Sample(reward=reward, status=Sample.Status[status], metadata=meta)


def test_a_step_is_counted_once_by_rollout_id_and_read_back_from_the_file(tmp_path):
    record, path = TaskRecord(), tmp_path / RECORD_FILE
    assert record.add_step(0, task_outcomes([_sample(1, 1.0), _sample(1, 0.0), _sample(2, 1.0)], "tau2/retail"))
    assert record.add_step(1, task_outcomes([_sample(1, 1.0)], "tau2/retail"))
    record.save(path)
    back = TaskRecord.load(path)
    assert back.last_step == 1 and back.tasks["tau2/retail/1"] == TaskStats("tau2/retail", "1", 3, 2, 1, "101")
    # a resume from an older checkpoint replays step 1: not counted again, nothing changes
    assert not back.add_step(1, task_outcomes([_sample(1, 0.0)], "tau2/retail"))
    assert back.tasks["tau2/retail/1"].attempts == 3 and back.steps[1] == {"tau2/retail": [1, 1]}
    assert [p.name for p in tmp_path.iterdir()] == [RECORD_FILE]  # the temporary file was renamed, not left
    assert json.loads(path.read_text())["tasks"]["tau2/retail/2"]["pass_rate"] == 1.0


def test_failed_and_deadline_episodes_are_no_evidence():
    deadline = _sample(3, 0.0)
    deadline.metadata["termination_reason"] = "deadline"
    outcomes = task_outcomes([_sample(3, 0.0, "FAILED"), deadline, _sample(3, 1.0, "TRUNCATED")], "tau2/retail")
    assert [(o.task, o.passed) for o in outcomes] == [("tau2/retail/3", True)]


def test_a_record_that_does_not_read_is_moved_aside_and_the_run_starts_fresh(tmp_path):
    path = tmp_path / RECORD_FILE
    path.write_text('{"version": 1, "tasks": ')
    assert TaskRecord.load(path) == TaskRecord()
    assert not path.exists() and (tmp_path / f"{RECORD_FILE}.bad").exists()


def test_train_pass_rate_reads_only_the_window_of_steps_before_the_eval():
    record = TaskRecord()
    record.add_step(0, task_outcomes([_sample(1, 0.0)] * 4, "tau2/retail"))
    record.add_step(5, task_outcomes([_sample(1, 1.0)] * 3 + [_sample(1, 0.0)], "tau2/retail"))
    assert record.train_pass_rate("tau2/retail", through_step=5, window_steps=3) == (0.75, 4)
    assert record.train_pass_rate("tau2/retail", through_step=5, window_steps=10) == (3 / 8, 8)
    assert record.train_pass_rate("tau2/airline", through_step=5, window_steps=10) is None


def test_a_task_saturated_over_its_window_is_drawn_about_floor_times_as_often():
    settings = CurriculumSettings(window=4, floor=0.25, seed=3)
    solved, mixed = TaskStats("d", "1", recent="0111111"), TaskStats("d", "2", recent="1111101")
    never = TaskStats("d", "3", recent="0000")
    assert task_weight(solved, settings) == task_weight(never, settings) == 0.25
    assert task_weight(mixed, settings) == task_weight(TaskStats("d", "4", recent="111"), settings) == 1.0
    draws = CurriculumDraws(settings)
    taken = sum(draws.keep(solved, index) for index in range(2000))
    assert all(draws.keep(mixed, index) for index in range(100))
    assert 0.2 < taken / 2000 < 0.3  # seeded: the same draws on every run
    step = draws.take({"d/1": solved, "d/2": mixed, "d/3": never})
    assert (step.looked_at, step.skipped, step.down_weighted) == (2100, 2000 - taken, ("d/1", "d/3"))
    assert [draws.keep(solved, i) for i in range(50)] == [CurriculumDraws(settings).keep(solved, i) for i in range(50)]
