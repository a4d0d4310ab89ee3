"""A task named as text (a TRL prompt, a NeMo Gym row's task) becomes the sample metadata every front door reads."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.data import metadata_from_name, task_ref_from_sample
from slime_tau_plugin.engine.errors import ConfigError


def test_a_tau2_name_reads_back_as_the_task_it_names(tau2_backend):
    config = TauConfig()
    metadata = metadata_from_name(" tau2/retail/train/7 ", config, "task")
    assert metadata == {"benchmark": "tau2", "domain": "retail", "split": "train", "task_id": "7"}
    ref = task_ref_from_sample(None, metadata, config)
    assert (ref.benchmark, ref.domain, ref.split, ref.task_id) == ("tau2", "retail", "train", "7")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("tau2/retail/train", "names no τ task"),
        (["tau2/retail/train/1"], "names no τ task"),
        ("tau2//train/1", "names no τ task"),
        ("tau2/bakery/train/1", "bakery"),
    ],
)
def test_a_name_that_is_not_a_task_is_refused_in_one_line_naming_the_field(tau2_backend, name, says):
    with pytest.raises(ConfigError) as info:
        metadata_from_name(name, TauConfig(), "TRL prompt")
    message = str(info.value)
    assert says in message and "\n" not in message
    assert message.startswith("TRL prompt") or "bakery" in message
