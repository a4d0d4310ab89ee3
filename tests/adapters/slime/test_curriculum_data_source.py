"""The curriculum's data source against slime's data-source contract, with the run's record, the all-samples hook
and the eval hook (``adapters/slime/curriculum.py``, ``task_record.py``).

CI has no slime, so :class:`Rows` and :class:`RowsWithBuffer` stand in for slime's ``RolloutDataSource`` and
``RolloutDataSourceWithBuffer`` (slime 624b824, ``slime/rollout/data_source.py``): groups of
``n_samples_per_prompt`` copies of a row with ``group_index``/``index`` set, the buffer served first, then
``super().get_samples`` for the rest. ``scripts/slime_curriculum_check.py`` runs the same through slime's own
classes and rollout loop. The rollout id slime's ``RolloutManager`` sets (``slime.rollout.sample_hooks``) is the
only other piece of slime stood in for.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from slime_tau_plugin.adapters.slime import curriculum
from slime_tau_plugin.adapters.slime.all_samples import process_all_samples
from slime_tau_plugin.adapters.slime.metrics import log_eval
from slime_tau_plugin.adapters.slime.task_record import forget_records, run_record
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.reporting.task_history import RECORD_FILE, TaskRecord
from tests.contracts.slime_sample import Sample

SOLVED = {"0", "1", "2", "3"}
"""Tasks the policy always solves; tasks 4..7 pass on the first sample of a group and fail on the second."""


class Rows:
    """slime's ``RolloutDataSource``: the dataset's rows in order, round and round, copied per sample."""

    def __init__(self, args: Any) -> None:
        self.args = args
        self.rows = [
            Sample(metadata={"benchmark": "tau2", "domain": "retail", "task_id": str(t)}, prompt=t) for t in range(8)
        ]
        self.offset = self.group_index = self.index = 0

    def get_samples(self, num_samples: int) -> list[list[Sample]]:
        groups = []
        for _ in range(num_samples):
            row, self.offset = self.rows[self.offset % len(self.rows)], self.offset + 1
            group = []
            for _ in range(self.args.n_samples_per_prompt):
                sample = copy.deepcopy(row)
                sample.group_index, sample.index = self.group_index, self.index
                self.index += 1
                group.append(sample)
            self.group_index += 1
            groups.append(group)
        return groups

    def __len__(self) -> int:
        return len(self.rows)


class RowsWithBuffer(Rows):
    """slime's ``RolloutDataSourceWithBuffer``: groups handed back first (``pop_first``), then fresh ones."""

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.buffer: list[list[Sample]] = []

    def get_samples(self, num_samples: int) -> list[list[Sample]]:
        samples, self.buffer = self.buffer[:num_samples], self.buffer[num_samples:]
        if len(samples) < num_samples:
            samples += super().get_samples(num_samples - len(samples))
        return samples

    def add_samples(self, samples: list[list[Sample]]) -> None:
        self.buffer.extend(samples)


DataSource = curriculum.curriculum_data_source(RowsWithBuffer, Rows)


def _args(tmp_path, **extra: Any) -> SimpleNamespace:
    base = dict(save=str(tmp_path), load=None, n_samples_per_prompt=2, rollout_seed=1)
    base |= dict(tau_curriculum_window=2, tau_curriculum_floor=0.25, tau_train_window_steps=4)
    return SimpleNamespace(**(base | extra))


def _play(groups: list[list[Sample]]) -> None:
    for group in groups:
        for k, sample in enumerate(group):
            solved = sample.metadata["task_id"] in SOLVED or k == 0
            sample.reward, sample.status = (1.0 if solved else 0.0), Sample.Status.COMPLETED
            sample.metadata["termination_reason"] = "agent_stop"


def _step(monkeypatch, args, source, rollout_id: int, caplog) -> dict[str, float]:
    """One training step as slime runs it: draw, play, then the all-samples hook under the step's rollout id."""
    groups = source.get_samples(4)
    _play(groups)
    monkeypatch.setitem(sys.modules, "slime.rollout.sample_hooks", SimpleNamespace(_current_rollout_id=rollout_id))
    caplog.clear()
    process_all_samples(args, groups, source)
    metrics = [r.args[2] for r in caplog.records if r.msg.startswith("tau metrics")]
    return {"drawn": Counter(g[0].metadata["task_id"] in SOLVED for g in groups), **metrics[-1]}


@pytest.fixture(autouse=True)
def _fresh_records():
    forget_records()
    yield
    forget_records()


def test_solved_tasks_are_drawn_less_over_steps_and_the_record_resumes(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="slime_tau_plugin.adapters.slime.metrics")
    args = _args(tmp_path)
    source = DataSource(args)
    steps = [_step(monkeypatch, args, source, rid, caplog) for rid in range(8)]
    # steps 0-1 play every task once at full weight; from then on the four solved tasks are drawn at 0.25
    assert steps[1]["rollout/tau/curriculum/down_weighted_tasks"] == 4.0
    assert all(f"rollout/tau/curriculum/weight/tau2/retail/{t}" in steps[1] for t in SOLVED)
    later = sum((s["drawn"] for s in steps[2:]), Counter())
    assert later[True] * 2 < later[False], later  # unweighted, they would come up as often
    skipped = sum(s["rollout/tau/curriculum/skipped"] for s in steps[2:])
    assert skipped == sum(s["rollout/tau/curriculum/looked_at"] for s in steps[2:]) - 4 * 6 > 0
    on_disk = TaskRecord.load(tmp_path / RECORD_FILE)
    assert on_disk.last_step == 7 and on_disk.down_weighted == (7, [f"tau2/retail/{t}" for t in sorted(SOLVED)])
    assert on_disk.tasks["tau2/retail/4"].pass_rate == 0.5 and on_disk.tasks["tau2/retail/0"].pass_rate == 1.0

    # a restart: a new process reads the record back; a step replayed after --load is not counted twice
    forget_records()
    resumed = DataSource(_args(tmp_path, load=str(tmp_path)))
    assert run_record(args).record == on_disk
    replay = _step(monkeypatch, args, resumed, 7, caplog)
    assert replay["rollout/tau/record/counted"] == 0.0
    assert TaskRecord.load(tmp_path / RECORD_FILE).tasks == on_disk.tasks
    assert _step(monkeypatch, args, resumed, 8, caplog)["rollout/tau/record/counted"] == 1.0

    # slime's buffer (groups a partial rollout handed back) is never weighted: those episodes are under way
    held = [g for g in Rows(args).get_samples(8) if g[0].metadata["task_id"] in SOLVED]
    resumed.add_samples(held)
    assert resumed.get_samples(4) == held


def test_each_eval_logs_the_train_pass_rate_beside_pass_1(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="slime_tau_plugin.adapters.slime.metrics")
    args = _args(tmp_path)
    source = DataSource(args)
    for rid in range(3):
        _step(monkeypatch, args, source, rid, caplog)
    evals = [Sample(metadata={"benchmark": "tau2", "domain": "retail", "task_id": str(t)}, prompt=t) for t in (8, 9)]
    _play([[s] for s in evals])
    evals[1].reward = 0.0
    caplog.clear()
    log_eval(2, args, {"retail_test": {"samples": evals}}, None)
    logged = next(r.args[2] for r in caplog.records if r.msg.startswith("tau metrics"))
    where = "eval/tau/retail_test/tau2/retail"
    train = TaskRecord.load(tmp_path / RECORD_FILE).train_pass_rate("tau2/retail", 2, 4)
    assert logged[f"{where}/pass^1"] == 0.5 and (logged[f"{where}/train_pass_rate"], 12 * 2) == (train[0], train[1])
    assert logged[f"{where}/train_minus_eval"] == pytest.approx(train[0] - 0.5)


def test_bad_settings_are_refused_naming_the_key(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ConfigError, match="tau_task_record_dir=.*is a file"):
        DataSource(_args(tmp_path, tau_task_record_dir=str(tmp_path / "a_file")))
    with pytest.raises(ConfigError, match="tau_curriculum_floor"):
        DataSource(_args(tmp_path, tau_curriculum_floor=0))
    with pytest.raises(ConfigError, match="tau_curriculum_window"):
        DataSource(_args(tmp_path, tau_curriculum_window=1))
    with pytest.raises(ConfigError, match="--rollout-all-samples-process-path slime_tau_plugin"):
        DataSource(_args(tmp_path, rollout_all_samples_process_path=None))
    with pytest.raises(ConfigError, match="needs a run folder"):
        DataSource(_args(tmp_path, save=None))
    with pytest.raises(AttributeError):
        curriculum.NotAClass  # noqa: B018  # only the data source is built lazily
    assert "slime.rollout.data_source" not in sys.modules  # importing the module imported no slime
