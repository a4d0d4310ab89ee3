"""scripts/lib/pip_install.sh hands uv the index settings pip would use (uv reads no pip configuration): a CI box
whose packages come from local mirrors must install the same packages through uv as through pip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "lib" / "pip_install.sh"
SHOW = '. "$0"; _tau_uv_env_from_pip; env | grep -E "^(UV_|SSL_CERT_FILE=)" | sort'


def uv_env(tmp_path: Path, pip_conf: str, **env: str) -> dict[str, str]:
    """The UV_* variables the helper exports, for a pip configured by ``pip_conf`` and ``PIP_*`` ``env``."""
    conf = tmp_path / "pip.conf"
    conf.write_text(pip_conf)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "SSL_CERT_FILE"))}
    # PIP_CONFIG_FILE is read after the machine's files: what it sets wins over them, like the PIP_* variables
    run_env = {**base, "PIP_CONFIG_FILE": str(conf), "PATH": f"{Path(sys.executable).parent}:{base['PATH']}", **env}
    out = subprocess.run(["bash", "-c", SHOW, str(SCRIPT)], env=run_env, capture_output=True, text=True, check=True)
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


def test_pip_config_files_and_variables_become_uv_settings(tmp_path):
    conf = "[global]\nextra-index-url = file:///mirror/a/simple file:///mirror/b/simple\nfind-links = /wheels/one\n"
    conf += "constraint = /etc/constraints.txt\n[install]\nfind-links = /wheels/two /wheels/three\n"
    env = uv_env(tmp_path, conf, PIP_INDEX_URL="https://index.example/simple", PIP_CERT="/certs/ca.pem")
    assert env["UV_INDEX"] == "file:///mirror/a/simple file:///mirror/b/simple"
    assert env["UV_FIND_LINKS"] == "/wheels/two,/wheels/three"  # [install] over [global]; uv wants commas
    assert env["UV_CONSTRAINT"] == "/etc/constraints.txt"
    assert env["UV_DEFAULT_INDEX"] == "https://index.example/simple"  # a PIP_* variable over the files
    assert env["SSL_CERT_FILE"] == "/certs/ca.pem"
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match"  # the best version across indexes, as pip picks


def test_uv_settings_already_given_are_kept(tmp_path):
    env = uv_env(tmp_path, "[global]\nfind-links = /wheels/pip\n", UV_FIND_LINKS="/wheels/mine")
    assert env["UV_FIND_LINKS"] == "/wheels/mine"
