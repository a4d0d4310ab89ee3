"""``tau_trust_remote_code``: off by default, on from the key or slime's args, and it reaches the tokenizer load.

The tokenizer used here is a real one (Qwen2.5's files) whose ``tokenizer_config.json`` points at a class in a
Python file next to it, as a model family that ships its own tokenizer code does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from slime_tau_plugin.adapters.slime.args import config_from_args
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError
from tests.conftest import require_sglang_parsers

_REMOTE_CODE = '''"""A tokenizer class that only loads when the directory's own code may run."""

from transformers import PreTrainedTokenizerFast


class RemoteTokenizer(PreTrainedTokenizerFast):
    ran_remote_code = True
'''


@pytest.mark.parametrize(("value", "expected"), [(True, True), (False, False), ("true", True), ("false", False)])
def test_the_key_parses(value, expected):
    assert config_from_args(SimpleNamespace(tau_trust_remote_code=value)).trust_remote_code is expected


def test_it_is_off_unless_the_key_or_slimes_args_turn_it_on():
    assert TauConfig().trust_remote_code is False
    assert config_from_args(SimpleNamespace()).trust_remote_code is False
    assert config_from_args(SimpleNamespace(trust_remote_code=True)).trust_remote_code is True
    assert config_from_args(SimpleNamespace(sglang_trust_remote_code=True)).trust_remote_code is True
    explicit = SimpleNamespace(trust_remote_code=True, tau_trust_remote_code=False)
    assert config_from_args(explicit).trust_remote_code is False, "the tau_ key wins over slime's"


@pytest.mark.parametrize("value", ["maybe", 2, [True], {"on": True}])
def test_a_wrong_type_names_the_key(value):
    with pytest.raises(ConfigError, match=r"tau_trust_remote_code=.* is invalid; expected true or false"):
        config_from_args(SimpleNamespace(tau_trust_remote_code=value))


@pytest.fixture
def remote_code_tokenizer(qwen25_dir, tmp_path) -> str:
    target = tmp_path / "remote_tok"
    target.mkdir()
    shutil.copy(Path(qwen25_dir) / "tokenizer.json", target)
    config = json.loads((Path(qwen25_dir) / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["tokenizer_class"] = "RemoteTokenizer"
    config["auto_map"] = {"AutoTokenizer": [None, "remote_tokenizer.RemoteTokenizer"]}
    (target / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (target / "remote_tokenizer.py").write_text(_REMOTE_CODE, encoding="utf-8")
    return str(target)


def test_the_setting_reaches_the_tokenizer_load(remote_code_tokenizer, tau2_backend):
    require_sglang_parsers()
    from slime_tau_plugin.engine.resources import EpisodeResources

    refused = config_from_args(SimpleNamespace(tau_tokenizer_path=remote_code_tokenizer))
    with pytest.raises(ConfigError, match="custom code"):
        EpisodeResources.build(refused, backend=tau2_backend)
    trusted = config_from_args(SimpleNamespace(hf_checkpoint=remote_code_tokenizer, trust_remote_code=True))
    resources = EpisodeResources.build(trusted, backend=tau2_backend)
    assert getattr(resources.tokenizer, "ran_remote_code", False) is True
