"""One table says which trainers read each key (``engine/config/keys.py``); every adapter refuses from it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from pydantic import BaseModel

import slime_tau_plugin.engine.config as config_package
from slime_tau_plugin.engine.config.keys import KEY_READERS, PROVIDED_BY, TauKeys, Trainer
from slime_tau_plugin.engine.config.tau_config import refuse_unread
from slime_tau_plugin.engine.errors import ConfigError


def config_models() -> list[type[BaseModel]]:
    """Every pydantic model declared in ``engine/config``."""
    found = []
    for info in pkgutil.iter_modules(config_package.__path__):
        module = importlib.import_module(f"{config_package.__name__}.{info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseModel) and value.__module__ == module.__name__:
                found.append(value)
    return found


def test_every_pydantic_field_in_engine_config_has_one_row_and_every_row_a_field():
    models = config_models()
    assert TauKeys in models
    fields = {name for model in models for name in model.model_fields}
    assert fields == set(KEY_READERS), f"no row: {fields - set(KEY_READERS)}; no field: {set(KEY_READERS) - fields}"


def test_the_table_is_frozen_and_its_rows_are_trainers():
    with pytest.raises(TypeError):
        KEY_READERS["domain"] = frozenset()  # type: ignore[index]
    assert all(isinstance(r, frozenset) and r <= set(Trainer) and r for r in KEY_READERS.values())
    assert all(Trainer.SLIME in r for r in KEY_READERS.values()), "slime's hooks read every key"
    for trainer, names in PROVIDED_BY.items():
        assert names and all(trainer not in KEY_READERS[n] for n in names), "a provided key is one it does not read"


def test_the_clis_flags_set_only_keys_the_table_says_the_cli_reads():
    from slime_tau_plugin.tools.cli.flag_names import FLAG_OF

    assert {name for name in FLAG_OF if Trainer.CLI not in KEY_READERS[name]} == set()


@pytest.mark.parametrize("trainer", [t for t in Trainer if t is not Trainer.SLIME])
def test_a_key_its_trainer_does_not_read_is_refused_unless_it_holds_its_default(trainer):
    refuse_unread({"task_record_dir": None, "max_redraws": 1, "domain": "airline"}, trainer)  # defaults pass
    with pytest.raises(ConfigError) as refused:
        refuse_unread({"domain": "airline", "task_record_dir": "/runs/a"}, trainer)
    message = str(refused.value)
    assert message.startswith(f"tau_task_record_dir='/runs/a' does nothing under {trainer}") and "\n" not in message
    assert "only slime reads it" in message


def test_slime_reads_every_key_and_verl_says_what_it_provides():
    refuse_unread({"max_weight_lag": 0, "routing_key_header": True}, Trainer.SLIME)
    with pytest.raises(ConfigError, match=r"tau_routing_key_header=True does nothing under verl \(verl provides it\)"):
        refuse_unread({"routing_key_header": True}, Trainer.VERL)
